"""The house rules on imports that import-linter cannot see (its layers contract is in pyproject):

- no import of our own packages inside a function (it hides a cycle or a slow import the module
  graph should show), except the few idioms listed in FUNCTION_LEVEL_ALLOWED, each with its reason;
- no underscore name imported from another module: a name shared on purpose is public."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = frozenset(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])
CODE = sorted(OWN | {"config"})

# (module, function) pairs whose imports of our own packages stay inside the function, and why.
FUNCTION_LEVEL_ALLOWED = {
}


def _modules():
    for package in CODE:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            relative = path.relative_to(ROOT).with_suffix("")
            parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
            yield ".".join(parts), path, ast.parse(path.read_text(), filename=str(path))


def _imported_modules(node: ast.Import | ast.ImportFrom, module: str, path: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: resolve against this module's package
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = package[: len(package) - node.level + 1]
        return [".".join([*base, node.module] if node.module else base)]
    return [node.module or ""]


def _is_own(name: str) -> bool:
    return name.split(".")[0] in OWN or name.split(".")[0] == "config"


def _function_level_imports():
    for module, path, tree in _modules():
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom) and any(
                        _is_own(name) for name in _imported_modules(node, module, path)):
                    yield module, function.name, node.lineno, path


def _private_names_imported():
    for module, path, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _imported_modules(node, module, path)[0]
            if not _is_own(source) or source == module:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    yield f"{path.relative_to(ROOT)}:{node.lineno} from {source} import {alias.name}"


def test_no_import_of_our_own_code_inside_a_function():
    found = sorted({(f"{path.relative_to(ROOT)}:{line} in {function}()", (module, function))
                    for module, function, line, path in _function_level_imports()})
    unexpected = [where for where, key in found if key not in FUNCTION_LEVEL_ALLOWED]
    assert not unexpected, ("import these at module level (or move the shared piece down a layer when the "
                            "import closes a cycle):\n" + "\n".join(unexpected))


def test_the_allowlist_names_only_imports_that_exist():
    present = {(module, function) for module, function, _line, _path in _function_level_imports()}
    stale = sorted(set(FUNCTION_LEVEL_ALLOWED) - present)
    assert not stale, f"no longer imports inside the function; remove from FUNCTION_LEVEL_ALLOWED: {stale}"


def test_no_private_name_is_imported_from_another_module():
    found = sorted(_private_names_imported())
    assert not found, "make the name public where it is shared on purpose:\n" + "\n".join(found)


def test_the_checks_see_the_app_code():
    assert sum(1 for _ in _modules()) > 200
