"""Every external tool this package runs (git, Valgrind's scripts, a Python probe, a child pytest)
runs under a time limit, so a hung tool cannot hold a test run or a CI job forever. One
exception: ``callgrind_control`` (see :func:`pytest_torchperf.kinds.instructions.measure_callgrind._instrumentation`).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_torchperf"
#: subprocess's functions that wait for the command they run.
WAITING = {"run", "call", "check_call", "check_output"}
#: Where a process is started without waiting for it: ChildProcess, whose every wait is timed.
POPEN_ONLY_IN = {"run/child_process.py"}
#: The one place git runs (store/environment.py:run_git).
GIT_ONLY_IN = {"store/environment.py"}
#: callgrind_control's wait: with a timeout, subprocess polls (waitpid, sleep, again) and callgrind
#: counts those loops once instrumentation is on (+2.9 % on a 4.6 M-instruction test). The
#: function, in the module of callgrind's helpers (its path may move: named by its file's name).
NO_TIMEOUT_ONLY_IN = ("callgrind", "_instrumentation")


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def problems_in(path: Path, where: str) -> list[str]:
    """What in module ``path`` (``where``: its path under the package) runs a tool without a
    limit, or runs git or starts a process outside the one place for it."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]

    def function_of(node: ast.AST) -> str:
        return next(
            (f.name for f in functions if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)),
            "",
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _name(node.func)
            keywords = {k.arg: k.value for k in node.keywords}
            if name.startswith("subprocess.") and name.split(".")[-1] in WAITING:
                if "timeout" not in keywords:
                    found.append(f"{where}:{node.lineno}: {name} without a timeout")
            if name.endswith("Popen") and where not in POPEN_ONLY_IN:
                found.append(f"{where}:{node.lineno}: a process started outside ChildProcess")
            if name in ("os.system", "os.popen") or name.startswith("os.spawn"):
                found.append(f"{where}:{node.lineno}: {name} (no limit possible)")
            timeout = keywords.get("timeout")
            if isinstance(timeout, ast.Constant) and timeout.value is None:
                module, function = NO_TIMEOUT_ONLY_IN
                if module not in Path(where).stem or function_of(node) != function:
                    found.append(f"{where}:{node.lineno}: timeout=None")
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value == "git":
                if where not in GIT_ONLY_IN:
                    found.append(f"{where}:{node.lineno}: runs git itself")
    return sorted(found)


def test_every_external_tool_runs_under_a_time_limit() -> None:
    found = [
        problem
        for path in sorted(PACKAGE.rglob("*.py"))
        for problem in problems_in(path, path.relative_to(PACKAGE).as_posix())
    ]
    assert found == []


def test_callgrind_control_alone_waits_without_a_limit() -> None:
    module, function = NO_TIMEOUT_ONLY_IN
    found = []
    for path in PACKAGE.rglob(f"*{module}*.py"):
        source = path.read_text(encoding="utf-8")
        found += [
            ast.get_source_segment(source, n) or ""
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.FunctionDef) and n.name == function
        ]
    (body,) = found
    assert '"callgrind_control"' in body and "timeout=None" in body


def test_the_check_catches_an_unlimited_tool(tmp_path: Path) -> None:
    module = tmp_path / "tool.py"
    module.write_text(
        "import subprocess\n"
        "def a():\n"
        "    subprocess.run(['git', 'status'], check=False)\n"
        "def b():\n"
        "    subprocess.check_output(['valgrind', '--version'], timeout=None)\n"
        "    return subprocess.Popen(['x'])\n",
        encoding="utf-8",
    )
    assert problems_in(module, "run/tool.py") == [
        "run/tool.py:3: runs git itself",
        "run/tool.py:3: subprocess.run without a timeout",
        "run/tool.py:5: timeout=None",
        "run/tool.py:6: a process started outside ChildProcess",
    ]
