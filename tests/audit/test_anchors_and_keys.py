"""Signed anchors of every stream head, outside the database, and the key settings."""

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.anchors import anchor_latest
from audit.keys import parse_key_ring
from audit.models import AuditEvent, AuditVerifiedHead
from audit.tasks import audit_anchor_task
from cases import services
from tests.audit.tampering import raw_execute, triggers_disabled, verify
from tests.factories import make_case

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anchor_dir(settings, tmp_path):
    settings.ARBITER_AUDIT_ANCHOR_DIR = tmp_path / "anchors"
    return tmp_path / "anchors"


@pytest.fixture
def streams(analyst, anchor_dir):
    cases = [make_case(actor=analyst, title=f"Case {i}") for i in range(2)]
    for case in cases:
        services.case_transition(actor=analyst, case=case, transition="triage")
    return [f"case:{case.pk}" for case in cases]


def test_the_command_writes_a_signed_anchor_of_every_head_and_verify_checks_it(streams, anchor_dir):
    assert "no anchor written yet" in verify("-v", "2")
    out = StringIO()
    call_command("audit_anchor", stdout=out)
    assert "Anchored 2 audit stream heads" in out.getvalue()
    lines = (anchor_dir / "anchors.jsonl").read_text().splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert line["key_id"] == "development-only" and len(line["signature"]) == 64
    heads = {stream: (sequence, digest) for stream, sequence, digest in line["heads"]}
    for stream in streams:
        last = AuditEvent.objects.filter(stream=stream).order_by("-sequence").first()
        assert heads[stream] == (last.sequence, last.hash)
    assert audit_anchor_task() == 2  # beat's task appends the next one
    assert len((anchor_dir / "anchors.jsonl").read_text().splitlines()) == 2
    assert anchor_latest().heads == heads
    assert "checked against the anchor of" in verify("-v", "2")


def test_beat_writes_the_anchors():
    entry = django_settings.CELERY_BEAT_SCHEDULE["anchor-audit-heads"]
    assert entry["task"] == "audit.tasks.audit_anchor_task"
    assert entry["schedule"] == float(django_settings.ARBITER_AUDIT_ANCHOR_INTERVAL_SECONDS)


def test_events_removed_from_the_end_with_the_head_rewritten_are_found_by_the_anchor(streams):
    """No verified head recorded yet: only the anchor, outside the database, knows the stream was longer."""
    call_command("audit_anchor", stdout=StringIO())
    stream = streams[0]
    last, before = AuditEvent.objects.filter(stream=stream).order_by("-sequence")[:2]
    with triggers_disabled():
        raw_execute("DELETE FROM audit_auditevent WHERE id = %s", [last.pk])
    raw_execute("UPDATE audit_auditstreamhead SET last_sequence = %s, last_hash = %s WHERE stream = %s",
                [before.sequence, before.hash, stream])
    with pytest.raises(CommandError, match="1 of 2 audit streams are broken"):
        verify()
    with pytest.raises(CommandError) as since:
        verify("--since")
    assert since.value.stderr.startswith(f"BROKEN {stream} at sequence {last.sequence} (stream head): the event "
                                         f"signed into the anchor of ")
    assert since.value.stderr.endswith("is gone (events removed?)\n")
    assert not AuditVerifiedHead.objects.filter(stream=stream).exists()
    assert AuditVerifiedHead.objects.filter(stream=streams[1]).exists()  # the intact stream is recorded


def test_an_edited_anchor_file_is_refused(streams, anchor_dir):
    call_command("audit_anchor", stdout=StringIO())
    path = anchor_dir / "anchors.jsonl"
    line = json.loads(path.read_text())
    line["heads"][0][1] += 5  # moved forward to hide what comes after
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(CommandError, match="The latest audit anchor cannot be trusted") as failed:
        verify()
    assert failed.value.stderr == (f"ANCHOR {path}: the signature of the last anchor ({line['anchored_at']}) does "
                                   f"not match its content: the anchor file was changed.\n")


# --- the key settings --------------------------------------------------------------------------

def _manage(tmp_path, *args, **env):
    clean = {key: value for key, value in os.environ.items()
             if not key.startswith(("ARBITER_AUDIT_", "DEBUG", "DJANGO_", "DATABASE_URL"))}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=clean | {"ARBITER_VAR_DIR": str(tmp_path), "SECRET_KEY": "k" * 50} | env)


PRINT_KEY = "from django.conf import settings as s; print(s.ARBITER_AUDIT_KEY_ID, sorted(s.ARBITER_AUDIT_KEYS))"


@pytest.mark.slow  # starts manage.py
@pytest.mark.engine_independent  # settings only, never the suite's database
def test_settings_refuse_to_start_without_a_key_outside_debug(tmp_path):
    result = _manage(tmp_path, "check", DEBUG="0")
    assert result.returncode != 0
    # manage.py says which setting is missing in one line (no traceback around it)
    assert result.stderr.startswith("Arbiter is not configured: ARBITER_AUDIT_KEYS (or ARBITER_AUDIT_KEY_FILE) is "
                                    "required unless DEBUG=1: create one with `python -m audit.keys`"), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # starts manage.py and audit.keys
@pytest.mark.engine_independent  # settings only, never the suite's database
def test_debug_uses_the_development_key_and_a_key_file_is_read(tmp_path):
    debug = _manage(tmp_path, "shell", "-v", "0", "-c", PRINT_KEY, DEBUG="1")
    assert debug.stdout.strip() == "development-only ['development-only']", debug.stderr
    made = subprocess.run([sys.executable, "-m", "audit.keys", "kid1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert made.returncode == 0 and len(parse_key_ring(made.stdout)["kid1"]) == 32
    old = subprocess.run([sys.executable, "-m", "audit.keys", "kid0"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60).stdout
    key_file = tmp_path / "audit.keys"
    key_file.write_text(f"# current first\n{made.stdout}{old}")
    production = _manage(tmp_path, "shell", "-v", "0", "-c", PRINT_KEY, DEBUG="0", ARBITER_AUDIT_KEY_FILE=str(key_file))
    assert production.stdout.strip() == "kid1 ['kid0', 'kid1']", production.stderr


@pytest.mark.parametrize("value, message", [
    ("k1", "each key is written KID:BASE64SECRET"),
    ("k1:not base64!", "the secret of key 'k1' is not base64"),
    ("k1:c2hvcnQ=", "the secret of key 'k1' has 5 bytes; use at least 32"),
    ("k1:" + "A" * 44 + ",k1:" + "B" * 44, "key id 'k1' is given twice"),
])
def test_a_malformed_key_is_refused_with_its_reason(value, message):
    from audit.keys import AuditKeyError

    with pytest.raises(AuditKeyError, match=message):
        parse_key_ring(value)
