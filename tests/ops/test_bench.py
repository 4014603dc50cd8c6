"""`make bench` keeps working: a tiny run prints every figure and removes its throwaway database."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Starts processes of its own (bench/run.py, always on SQLite: see below), whatever the suite's engine.
pytestmark = [pytest.mark.slow, pytest.mark.engine_independent]

ROOT = Path(__file__).resolve().parents[2]


def test_bench_prints_every_figure_and_cleans_up(tmp_path):
    # Always SQLite here: pointed at the suite's PostgreSQL, the bench's test_<name> database could
    # be the very one pytest-django is using.
    env = {key: value for key, value in os.environ.items()
           if key not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}} | {"DEBUG": "1", "ARBITER_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "bench/run.py", "--audit-events", "20", "--cases", "5",
                             "--list-cases", "12", "--replay-events", "14"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"audit_record, 1 stream\s+20 appends in [\d.]+ s → [\d,]+ appends/s", out)
    assert re.search(r"audit_record, 50 streams\s+20 appends", out)
    assert re.search(r"case_create\s+5 cases in [\d.]+ s → [\d,]+ cases/s", out)
    assert re.search(r"case_list_for_user \(12 cases\)\s+all rows: 12 cases, 1 query, [\d.]+ ms", out)
    assert re.search(r"first page of 50: 12 cases, 1 query", out)
    assert re.search(r"case_replay\s+1[45] events replayed in [\d.]+ ms \(the case matches its replay\)", out)
    assert not (tmp_path / "bench" / "bench.sqlite3").exists()
