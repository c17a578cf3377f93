"""The package source files a stage can execute: the import closure of its entry, read from the ast.

A stage's action key covers the digest of every file here (coppelius.cas), so an edit to any code a
stage can run changes its key, and an edit to code it cannot run changes nothing. The closure
follows every import of a module, at module level or inside a function (a lazy import is code the
stage can run), and the `__init__.py` of every package on the way (Python runs them on import).

A stage's entry is its function in coppelius/stages.py: the imports inside that function and
inside the stages.py functions it calls, with stages.py itself and its module-level imports.
"""
import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
NAME = PACKAGE.name


def module_path(module: str) -> Path | None:
    """The file of a package module (a .py file, or a package's __init__.py), None if there is none."""
    parts = module.split(".")[1:]
    base = PACKAGE.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _package_of(module: str) -> str:
    path = module_path(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def resolve(node: ast.Import | ast.ImportFrom, module: str) -> set[str]:
    """The package modules an import statement in `module` loads (outside modules are dropped)."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            package = _package_of(module)
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        names = {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {n for n in names if (n == NAME or n.startswith(NAME + ".")) and module_path(n) is not None}


def _with_parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


@lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imports(module: str, nodes=None) -> set[str]:
    """The package modules `module` imports anywhere in its source (or in `nodes` of it)."""
    found = set()
    for node in ast.walk(nodes if nodes is not None else _tree(module_path(module))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in resolve(node, module):
                found |= _with_parents(name)
    return found


def closure(modules: set[str], opened: frozenset = frozenset()) -> set[str]:
    """Every package module that importing `modules` can load; the `opened` ones add only what
    `modules` already names (stages.py: each stage runs its own functions, not the others')."""
    seen, todo = set(), set().union(*(_with_parents(m) for m in modules)) if modules else set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo |= (set() if module in opened else imports(module)) - seen
    return seen


def stage_entry(function: str) -> set[str]:
    """The modules a stages.py function imports, itself or through the stages.py functions it calls,
    and stages.py with its module-level imports."""
    module = f"{NAME}.stages"
    tree = _tree(module_path(module))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    top_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    entry = {module} | set().union(*(resolve(n, module) for n in top_level))
    seen, todo = set(), [function]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        entry |= imports(module, functions[name])
        todo += [n.func.id for n in ast.walk(functions[name]) if isinstance(n, ast.Call) and
                 isinstance(n.func, ast.Name) and n.func.id in functions]
    return entry


def stage_files(function: str) -> list[str]:
    """The package-relative source files of a stage's closure, sorted."""
    modules = closure(stage_entry(function), frozenset({f"{NAME}.stages"}))
    return sorted(module_path(m).relative_to(PACKAGE).as_posix() for m in modules)
