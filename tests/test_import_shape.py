"""The house rules on imports that import-linter cannot see (its layers contract, between apps, is in
pyproject's [tool.importlinter]):

- no import of our own packages inside a function (it hides a cycle or a dependency the module
  graph should show), except the few idioms in FUNCTION_LEVEL_ALLOWED, each with its reason;
- the module-level imports of our own modules form no cycle (a shared piece moves down into a
  module of its own, or the upper module fills a core.slots.Slot in its AppConfig.ready());
- no underscore name imported from another module of ours: a name shared on purpose is public."""

from __future__ import annotations

import ast
import tomllib
from fnmatch import fnmatch
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = frozenset(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]) | {
    "config"}

# (module pattern, function) whose imports of our own packages stay inside the function, and why.
FUNCTION_LEVEL_ALLOWED = {
    # AppConfig.ready(): Django imports an app's apps.py before any model exists; what the app wires
    # up (signal receivers, its registrations into a lower layer's slots) can be imported only once
    # the app registry is ready, which is when Django calls ready().
    ("*.apps", "ready"),
    # The Celery app is created while the settings load (config/__init__.py), before Django's apps
    # are ready; its worker start and stop handlers import the outbox when the worker runs them.
    ("config.celery", "_worker_started"),
    ("config.celery", "_worker_stopping"),
}


@cache
def _modules() -> tuple[tuple[str, Path, ast.Module], ...]:
    found = []
    for package in sorted(OWN):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            relative = path.relative_to(ROOT).with_suffix("")
            parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
            found.append((".".join(parts), path, ast.parse(path.read_text(), filename=str(path))))
    return tuple(found)


def _source(node: ast.Import | ast.ImportFrom, module: str, path: Path) -> list[str]:
    """The module(s) an import statement names, relative imports resolved against `module`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        base = package[: len(package) - node.level + 1]
        return [".".join([*base, node.module] if node.module else base)]
    return [node.module or ""]


def _is_own(name: str) -> bool:
    return name.split(".")[0] in OWN


def _allowed(module: str, function: str) -> bool:
    return any(fnmatch(module, pattern) and function == name for pattern, name in FUNCTION_LEVEL_ALLOWED)


def _function_level_imports():
    for module, path, tree in _modules():
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom) and any(
                        _is_own(name) for name in _source(node, module, path)):
                    yield module, function.name, f"{path.relative_to(ROOT)}:{node.lineno} in {function.name}()"


def _module_level_imports(tree: ast.Module):
    """Import statements run when the module is imported: outside functions and classes' methods,
    and outside `if TYPE_CHECKING:` blocks."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            pending.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))


def _import_graph() -> dict[str, set[str]]:
    """module → the modules of ours it imports at module level (`from package import module` counts
    as an import of that module, not of the package's __init__)."""
    trees = {module: (path, tree) for module, path, tree in _modules()}

    def deepest(name: str) -> str | None:
        parts = name.split(".")
        while parts and ".".join(parts) not in trees:
            parts.pop()
        return ".".join(parts) or None

    graph = {}
    for module, (path, tree) in trees.items():
        targets = set()
        for node in _module_level_imports(tree):
            for name in filter(_is_own, _source(node, module, path)):
                names = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else [""]
                targets |= {deepest(f"{name}.{alias}" if alias else name) for alias in names}
        graph[module] = targets - {module, None}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_names_imported():
    """`from a.b import _name`, and `b._name` where b is a module of ours this module imported."""
    modules = {module for module, _path, _tree in _modules()}
    for module, path, tree in _modules():
        imported_modules = {}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            source = _source(node, module, path)[0]
            if not _is_own(source) or source == module:
                continue
            if isinstance(node, ast.Import):
                imported_modules.update({alias.asname or alias.name: alias.name for alias in node.names})
                continue
            for alias in node.names:
                if _is_private(alias.name):
                    yield f"{path.relative_to(ROOT)}:{node.lineno} from {source} import {alias.name}"
                elif f"{source}.{alias.name}" in modules:
                    imported_modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _is_private(node.attr)
                    and node.value.id in imported_modules):
                yield f"{path.relative_to(ROOT)}:{node.lineno} {imported_modules[node.value.id]}.{node.attr}"


def test_no_import_of_our_own_code_inside_a_function():
    unexpected = sorted(where for module, function, where in _function_level_imports()
                        if not _allowed(module, function))
    assert not unexpected, ("import these at module level (when that closes a cycle, move the shared piece "
                            "down into a module of its own, or fill a core.slots.Slot from AppConfig.ready()):\n"
                            + "\n".join(unexpected))


def test_every_allowed_function_level_import_still_exists():
    used = {(pattern, name) for module, function, _where in _function_level_imports()
            for pattern, name in FUNCTION_LEVEL_ALLOWED if fnmatch(module, pattern) and function == name}
    assert used == FUNCTION_LEVEL_ALLOWED, f"remove from FUNCTION_LEVEL_ALLOWED: {FUNCTION_LEVEL_ALLOWED - used}"


def test_module_level_imports_form_no_cycle():
    cycles = _cycles(_import_graph())
    assert not cycles, "these modules import each other (directly or round a loop):\n" + "\n".join(
        " <-> ".join(cycle) for cycle in cycles)


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_private_name_is_imported_from_another_module():
    found = sorted(_private_names_imported())
    assert not found, "make the name public where it is shared on purpose:\n" + "\n".join(found)


def test_the_checks_see_the_app_code():
    graph = _import_graph()
    assert len(graph) > 250 and "runs.executor" in graph["runs.tasks"]
    assert any(module == "cases.apps" for module, _function, _where in _function_level_imports())
