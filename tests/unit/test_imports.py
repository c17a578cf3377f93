"""The package's import graph, read from the ast (coppelius.sources): the contract layer imports
nothing above it, the runtime nothing of the build side, the build stages each other only through
the layer, and no module imports itself back through others (no cycles)."""
import ast

from coppelius import sources

PACKAGE = sources.NAME
LAYER = (f"{PACKAGE}.formats", f"{PACKAGE}.errors", f"{PACKAGE}.canonical")
PARTS = ("plan", "realize", "admit", "runtime")
# Beside the layer, each part may import only these (the part's own input or definition):
BESIDE_THE_LAYER = {
    "plan": (f"{PACKAGE}.config", f"{PACKAGE}.model"),   # the plan stage reads the configuration
    "realize": (),
    "admit": (f"{PACKAGE}.model",),                        # the parameter count, from the model's dimensions
    "runtime": (f"{PACKAGE}.kernels",),                    # the cpu device runs the reference kernels
}


def modules() -> list[str]:
    out = []
    for path in sorted(sources.PACKAGE.rglob("*.py")):
        rel = path.relative_to(sources.PACKAGE).with_suffix("")
        parts = [PACKAGE, *rel.parts]
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def edges() -> dict[str, set[str]]:
    """module -> the package modules it imports (anywhere in it), without its own ancestors."""
    graph = {}
    for module in modules():
        tree = ast.parse(sources.module_path(module).read_text())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= sources.resolve(node, module)
        graph[module] = {m for m in found if not module.startswith(m + ".") and m != module}
    return graph


def inside(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_walk_sees_the_known_imports():
    graph = edges()
    assert f"{PACKAGE}.formats.kernels" in graph[f"{PACKAGE}.plan.graph"]
    assert f"{PACKAGE}.formats.program" in graph[f"{PACKAGE}.admit.common"]
    assert f"{PACKAGE}.formats.kernels" in graph[f"{PACKAGE}.realize.nvrtc"]  # a lazy import counts too
    assert len(graph) > 40


def test_the_contract_layer_imports_nothing_above_it():
    bad = [(m, t) for m, targets in edges().items() if inside(m, *LAYER) for t in targets if not inside(t, *LAYER)]
    assert not bad, f"the contract layer imports upward: {bad}"


def test_the_runtime_imports_nothing_of_the_build():
    build = tuple(f"{PACKAGE}.{p}" for p in ("plan", "realize", "admit", "stages", "cas", "sources"))
    bad = [(m, t) for m, targets in edges().items() if inside(m, f"{PACKAGE}.runtime") for t in targets
           if inside(t, *build)]
    assert not bad, f"the runtime imports the build side: {bad}"


def test_plan_realize_admit_and_runtime_import_only_the_layer():
    bad = []
    for module, targets in edges().items():
        own = next((p for p in PARTS if inside(module, f"{PACKAGE}.{p}")), None)
        if own is None:
            continue
        allowed = (f"{PACKAGE}.{own}", *LAYER, *BESIDE_THE_LAYER[own])
        bad += [(module, t) for t in targets if not inside(t, *allowed)]
    assert not bad, f"a part imports something other than the contract layer: {bad}"


def test_no_import_cycles():
    graph, state, stack = edges(), {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycle = stack[stack.index(target):] + [target]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"
    for module in sorted(graph):
        if module not in state:
            visit(module)
