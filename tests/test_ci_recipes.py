"""The CI recipes users copy are valid YAML, and every ``torchperf`` command in them parses with
the command as it is (the example project's workflow and the YAML blocks of the docs), as does
every ``torchperf`` command of the docs' shell blocks."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_torchperf import cli
from tests.subprocesses import git

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "example_project" / ".github" / "workflows" / "perf.yml"
DOCS = [
    ROOT / "README.md",
    ROOT / "example_project" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]


def _yaml_blocks() -> list[tuple[str, str]]:
    return [
        (f"{path.name} block {i}", block)
        for path in DOCS
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", path.read_text(), re.S))
    ]


def _run_lines(node: Any) -> Iterator[str]:
    """Every line of every ``run:`` step (or GitLab ``script:`` entry) in a parsed recipe."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("run", "script"):
                for item in value if isinstance(value, list) else [value]:
                    yield from str(item).splitlines()
            else:
                yield from _run_lines(value)
    elif isinstance(node, list):
        for item in node:
            yield from _run_lines(item)


def _check_torchperf_commands(recipe: Any) -> int:
    """Parse each ``torchperf ...`` command line with the real parser; return how many."""
    checked = 0
    for line in _run_lines(recipe):
        line = line.strip()
        if not line.startswith("torchperf "):
            continue
        words = shlex.split(line.split("#", 1)[0])
        try:
            cli.parse_args(words[1:])
        except SystemExit as exc:  # argparse's way of refusing
            raise AssertionError(f"torchperf refuses this recipe's command: {line}") from exc
        checked += 1
    return checked


@pytest.mark.parametrize(("where", "block"), _yaml_blocks(), ids=lambda v: str(v)[:30])
def test_every_yaml_block_of_the_docs_parses(where: str, block: str) -> None:
    _check_torchperf_commands(yaml.safe_load(block))


def _shell_commands() -> list[tuple[str, str]]:
    """Each ``torchperf ...`` line of the docs' shell blocks (``bash``, ``sh``, ``console``; not the
    unmarked blocks of output, whose lines start ``torchperf bisect:`` and the like)."""
    found = []
    for path in DOCS:
        for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", path.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip().removeprefix("$ ")
                if line.startswith("torchperf "):
                    found.append((path.name, line))
    return found


def test_the_docs_show_shell_commands() -> None:
    assert len(_shell_commands()) >= 12  # the pattern still finds them


@pytest.mark.parametrize(("where", "line"), _shell_commands(), ids=lambda v: str(v)[:40])
def test_every_torchperf_command_of_the_docs_parses(
    where: str, line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = shlex.split(line.split(" #", 1)[0])
    # The results files the docs name exist where their commands run: `report FILE` tells a
    # results file from a baseline folder by what the path is, and refuses a missing one.
    monkeypatch.chdir(tmp_path)
    for word in words:
        if word.endswith(".json") and not word.startswith(("-", "/")):
            (tmp_path / word).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / word).write_text("{}")
    try:
        cli.parse_args(words[1:])
    except SystemExit as exc:
        raise AssertionError(f"{where}: torchperf refuses this command: {line}") from exc


def test_the_example_workflow_compares_in_shards_and_merges_them() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    jobs = workflow["jobs"]
    assert len(jobs["compare"]["strategy"]["matrix"]["tests"]) == 3
    assert jobs["report"]["needs"] == "compare" and "always()" in jobs["report"]["if"]
    merges = [line for line in _run_lines(jobs["report"]) if line.startswith("torchperf merge")]
    assert merges and "shards/*/results.json" in merges[0]
    assert _check_torchperf_commands(workflow) == 3  # merge, history, bisect
    # The shards' test paths cover every test module of the example project, once each.
    shards = [p for entry in jobs["compare"]["strategy"]["matrix"]["tests"] for p in entry.split()]
    modules = sorted(
        str(p.relative_to(WORKFLOW.parents[2]))
        for p in (WORKFLOW.parents[2] / "tests").glob("test_*.py")
    )
    assert sorted(shards) == modules


def test_the_example_workflows_history_step_keeps_each_run_on_a_branch(tmp_path: Path) -> None:
    """The save job's history step, run by bash as written, on two runs of main against a bare
    remote: the first starts the perf-history branch from an empty commit, the second adds its
    file to it, and torchperf history reads both runs."""
    from tests.unit.test_history import _run_file

    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    (step,) = [s for s in jobs["save"]["steps"] if "perf-history" in s.get("name", "")]
    assert any("torchperf-history" in str(s.get("with")) for s in jobs["save"]["steps"])
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(tmp_path, "clone", "-q", str(remote), str(work))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    shas = []
    for i in range(2):
        (work / "model.py").write_text(f"# version {i}\n")
        git(work, "add", "model.py")
        git(work, "commit", "-qm", f"main {i}")
        git(work, "push", "-q", "origin", "HEAD")
        sha = git(work, "rev-parse", "HEAD")
        shas.append(sha)
        _run_file(
            work / "perf" / "results.json", sha, f"2026-11-0{i + 1}T12:00:00+00:00", {"m": 1e-3}
        )
        # The save job's baseline commit comes before this step: HEAD is no longer the run's.
        git(work, "commit", "-q", "--allow-empty", "-m", "perf: record baselines")
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", step["run"]],
            cwd=work,
            env={**env, "GITHUB_SHA": sha},
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"torchperf: history of {i + 1} run" in proc.stdout, proc.stdout + proc.stderr
        assert (work / "perf" / "history.html").is_file()
        # The next run of main is a fresh runner: no worktree, no local perf-history branch.
        git(work, "worktree", "remove", "--force", str(tmp_path / "history"))
        git(work, "branch", "-D", "perf-history")
    kept = git(remote, "ls-tree", "-r", "--name-only", "perf-history").splitlines()
    assert len(kept) == 2 and all(name.startswith("runs/") for name in kept), kept
    assert sorted(name.split("-")[2] for name in kept) == sorted(sha[:10] for sha in shas), kept
    assert "main 0" not in git(remote, "log", "--format=%s", "perf-history")  # its own history
    # docs/history.md shows the same step.
    docs = (ROOT / "docs" / "history.md").read_text()
    assert all(line.strip() in docs for line in step["run"].splitlines()), step["run"]
