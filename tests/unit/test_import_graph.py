"""The package's import graph: layers import only downwards, no module cycles, and the pure layers
import neither pytest nor torch. Deferred imports (inside functions, under ``TYPE_CHECKING``)
count: a cycle hidden in a function is still a knot.

Layers, lowest first (docs/architecture.md)::

    core < variants < options < measure = store < judge < report < run < pytest_plugin = cli
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_torchperf"
LAYERS = {
    "core": 0,
    "variants": 1,
    "options": 2,
    "measure": 3,
    "store": 3,
    "judge": 4,
    "report": 5,
    "run": 6,
    "pytest_plugin": 7,
    "cli": 7,
}
#: Layers that must not import pytest or torch at module level (torch may load lazily, inside
#: functions, in measure, variants and run; pytest only in pytest_plugin).
NO_PYTEST = {"core", "variants", "options", "measure", "store", "judge", "report", "run", "cli"}
NO_MODULE_LEVEL_TORCH = set(LAYERS)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere (module level, functions, TYPE_CHECKING)."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            targets += kind_part_edges(node, modules)
            for target in targets:
                if target in modules and target != name and not target.startswith(name + "."):
                    graph[name].add(target)
    return graph


#: A module of a measurement kind's package (``pytest_torchperf.kinds.<kind>.<module>``) belongs to
#: the layer its name starts with (``measure_callgrind`` is a measure module, ``plugin_runs`` a
#: pytest_plugin one); the registry and each kind's declaration (the packages' ``__init__``) are
#: core: they name the parts, the layer that uses a part loads it (:func:`kind_part_edges`).
KIND_MODULE_LAYERS = {
    "options": "options",
    "measure": "measure",
    "store": "store",
    "judge": "judge",
    "report": "report",
    "run": "run",
    "plugin": "pytest_plugin",
    "cli": "cli",
}


def kind_part_edges(node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """A call ``part(spec, "judge")`` or ``parts("judge")`` (:mod:`pytest_torchperf.kinds`) loads
    a kind's module of that layer by name: it counts as importing every kind's ``judge``
    module."""
    if not isinstance(node, ast.Call):
        return []
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    # part(spec, layer) and parts(layer, having=...): where the layer is the argument.
    position = {"part": 1, "parts": 0}.get(str(name))
    if position is None:
        return []
    layer_arg = node.args[position] if len(node.args) > position else None
    layer_arg = next((k.value for k in node.keywords if k.arg == "layer"), layer_arg)
    if not isinstance(layer_arg, ast.Constant):
        return []
    suffix = f".{layer_arg.value}"
    return [m for m in modules if m.startswith("pytest_torchperf.kinds.") and m.endswith(suffix)]


def layer(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "kinds":
        if len(parts) <= 3:
            return "core"
        return KIND_MODULE_LAYERS.get(parts[3].split("_")[0])
    return parts[1] if len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` where ``b``'s layer is above ``a``'s."""
    found = []
    for source, targets in graph.items():
        if layer(source) not in LAYERS:
            continue
        for target in targets:
            if layer(target) in LAYERS and LAYERS[layer(target)] > LAYERS[layer(source)]:
                found.append(f"{source} -> {target}")
    return sorted(found)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def module_level_imports(path: Path) -> set[str]:
    """Top-level modules imported at module level (not in functions or TYPE_CHECKING blocks)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_layers_import_only_downwards() -> None:
    assert upward_imports(import_graph(PACKAGE)) == []


def test_every_module_of_a_kind_names_its_layer() -> None:
    """A kind's module whose name starts with no layer would escape the layer check."""
    unnamed = [
        name
        for path in (PACKAGE / "kinds").rglob("*.py")
        if layer(name := module_name(path, PACKAGE)) is None
    ]
    assert unnamed == []


def test_a_kinds_part_counts_as_an_import_of_that_layer() -> None:
    graph = import_graph(PACKAGE)
    assert "pytest_torchperf.kinds.instructions.judge" in graph["pytest_torchperf.judge.kinds"]
    assert "pytest_torchperf.kinds.ab.run" in graph["pytest_torchperf.run.kinds"]


def imports_of_kinds_modules(root: Path) -> list[str]:
    """``a -> b`` where ``a`` is outside ``kinds/`` and imports ``b``, a module of a kind's
    package (``pytest_torchperf.kinds.ab.plugin_runs``), by name: the registry's part calls
    (:func:`kind_part_edges`) are the way in."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    found = []
    for name, path in modules.items():
        if name.startswith("pytest_torchperf.kinds"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            found += [
                f"{name} -> {t}"
                for t in targets
                if t in modules and t.startswith("pytest_torchperf.kinds.") and t.count(".") > 2
            ]
    return sorted(found)


def test_no_module_outside_the_kinds_imports_a_kinds_module_by_name(tmp_path: Path) -> None:
    """The rest of the package asks the registry for a kind's part (docs/architecture.md,
    Measurement kinds); the registry and the declarations (``kinds.ab``) are fine."""
    assert imports_of_kinds_modules(PACKAGE) == []
    package = tmp_path / "pytest_torchperf"
    (package / "kinds" / "ab").mkdir(parents=True)
    (package / "run").mkdir()
    for module in ("__init__", "kinds/__init__", "kinds/ab/__init__", "kinds/ab/run_sides"):
        (package / f"{module}.py").write_text("")
    (package / "run" / "bisect.py").write_text(
        "from pytest_torchperf.kinds import parts\nfrom pytest_torchperf.kinds.ab import SPEC\n"
        "def f():\n    from pytest_torchperf.kinds.ab.run_sides import x\n"
    )
    assert imports_of_kinds_modules(package) == [
        "pytest_torchperf.run.bisect -> pytest_torchperf.kinds.ab.run_sides"
    ]


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(import_graph(PACKAGE)) == []


def test_pure_layers_import_neither_pytest_nor_torch_at_module_level() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path, PACKAGE)
        imported = module_level_imports(path)
        if (layer(name) in NO_PYTEST or name == "pytest_torchperf") and "pytest" in imported:
            offenders.append(f"{name} imports pytest")
        if "torch" in imported:
            offenders.append(f"{name} imports torch at module level")
    assert offenders == []


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The checks themselves fail on a package that has the knots they guard against."""
    package = tmp_path / "pytest_torchperf"
    for sub in ("judge", "report", "run"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "judge" / "a.py").write_text("def f():\n    from pytest_torchperf.report import b\n")
    (package / "report" / "b.py").write_text("from pytest_torchperf.judge import a\n")
    (package / "run" / "c.py").write_text("from ..judge import a\n")
    graph = import_graph(package)
    assert graph["pytest_torchperf.run.c"] == {"pytest_torchperf.judge", "pytest_torchperf.judge.a"}
    assert upward_imports(graph) == [
        "pytest_torchperf.judge.a -> pytest_torchperf.report",
        "pytest_torchperf.judge.a -> pytest_torchperf.report.b",
    ]
    assert cycles(graph) == [["pytest_torchperf.judge.a", "pytest_torchperf.report.b"]]


def test_a_part_called_through_the_module_or_by_keyword_counts_too() -> None:
    modules = {"pytest_torchperf.kinds.ab.judge": Path("x")}
    for call in ('kinds.part(spec, "judge")', 'part(spec, layer="judge")', 'parts("judge")'):
        node = ast.parse(call).body[0].value  # type: ignore[attr-defined]
        assert kind_part_edges(node, modules) == ["pytest_torchperf.kinds.ab.judge"]
