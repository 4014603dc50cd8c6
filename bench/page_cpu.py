#!/usr/bin/env python
"""CPU per request of the pages `make bench-load` requests most, measured in process: no server, no
network, no locust — so the figure does not depend on how loaded the machine is (CPU time of this
process, `time.process_time`, not wall time). It prints, it never asserts.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench_cpu .venv/bin/python bench/page_cpu.py

The database is the benchmark's own, seeded with `manage.py seed_demo` (run `migrate` and
`seed_demo` on it first); DEBUG is off, as under gunicorn. Each page is requested --repeat times
by the person bench/locustfile.py would send (a demo user of the acme tenant), pages interleaved
round by round; --profile NAME prints cProfile's top functions of that page instead."""

from __future__ import annotations

import argparse
import base64
import cProfile
import io
import os
import pstats
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-page-cpu-" + "k" * 50)
os.environ.setdefault("ALLOWED_HOSTS", "testserver")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("LOG_LEVEL", "WARNING")
# The pages measured only read; a key for this process is enough (required unless DEBUG).
os.environ.setdefault("ARBITER_AUDIT_KEYS", "k1:" + base64.b64encode(secrets.token_bytes(32)).decode())


def pages(client_for, reference: str) -> dict:
    """name → (client, path): who asks for what, as in bench/locustfile.py."""
    analyst, supervisor, anonymous = client_for("analyst"), client_for("supervisor"), client_for(None)
    return {
        "queue": (analyst, "/"),
        "case page": (analyst, f"/cases/{reference}/"),
        "review inbox": (supervisor, "/review/"),
        "login page": (anonymous, "/accounts/login/"),
        "API case list": (analyst, "/api/v1/cases/"),
    }


def measure(targets: dict, repeat: int) -> dict[str, list[float]]:
    cpu: dict[str, list[float]] = {name: [] for name in targets}
    for _round in range(repeat):
        for name, (client, path) in targets.items():
            started = time.process_time()
            response = client.get(path)
            cpu[name].append((time.process_time() - started) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{name} ({path}) answered {response.status_code}")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--profile", default="", help="a page name: print its cProfile top functions")
    args = parser.parse_args()

    import django

    django.setup()
    from django.test import Client

    from accounts.models import User
    from cases.models import Case

    def client_for(username: str | None) -> Client:
        client = Client()
        if username:
            client.force_login(User.objects.get(username=username))
        return client

    analyst = User.objects.get(username="analyst")
    reference = Case.objects.filter(tenant_id=analyst.tenant_id).order_by("pk").values_list("reference", flat=True)[0]
    targets = pages(client_for, reference)
    measure(targets, 3)  # warm: templates compiled, connections open, caches filled
    if args.profile:
        client, path = targets[args.profile]
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.repeat):
            client.get(path)
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(45)
        print(out.getvalue())
        return
    cpu = measure(targets, args.repeat)
    print(f"CPU per request, ms (process time, {args.repeat} requests each, interleaved; load {os.getloadavg()})")
    for name, values in cpu.items():
        print(f"  {name:<16} median {statistics.median(values):6.1f}   mean {statistics.mean(values):6.1f}   "
              f"min {min(values):6.1f}")


if __name__ == "__main__":
    main()
