"""The house shape of the app code: no function over 80 lines (ruff checks complexity and statement
counts; this checks lines, docstrings and comments included)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("config", "core", "accounts", "audit", "cases", "conversations", "runs", "agents", "analyst",
        "integrations", "outbox", "ops", "reports", "web")
MAX_LINES = 80


def _functions():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield path.relative_to(ROOT), node


def test_no_function_in_the_app_code_is_longer_than_80_lines():
    long = [f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path, node in _functions() if node.end_lineno - node.lineno + 1 > MAX_LINES]
    assert not long, "split these into named pieces:\n" + "\n".join(long)


def test_the_check_sees_the_app_code():
    assert sum(1 for _ in _functions()) > 500
