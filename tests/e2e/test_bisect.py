"""``torchperf bisect``: the first commit where the selected perf tests changed, in scratch git
repositories.

The real runs bisect by the exact counters (one pytest process of a few seconds per revision);
the instruction-count and A/B modes run the same loop with slower probes, measured by
benchmarks/bisect_scratch.py (32 commits, +3 % pure-Python and +20 % slowdowns). The bisection
itself is checked for every position of the first bad commit with a probe that only reads the
commit's position.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_torchperf import cli
from pytest_torchperf.run.bisect import bisect
from pytest_torchperf.run.bisect_mode import BisectError, Classify
from pytest_torchperf.run.revision_probe import Probe, Target
from tests.e2e.conftest import FAST_INI
from tests.subprocesses import git

MODEL = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.body(x)
        return h{extra}


def test_net(torchperf):
    torchperf(Net(), torch.randn(2, 16), name="net")
"""


def _repository(root: Path, commits: int, files: dict[int, dict[str, str]]) -> list[str]:
    """A repository of ``commits`` commits; ``files[i]`` are the files written before commit i.
    Returns the commit ids, oldest first."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    ids = []
    for i in range(commits):
        for name, text in files.get(i, {}).items():
            (root / name).write_text(text)
        (root / "NOTES.txt").write_text(f"commit {i}\n")
        git(root, "add", "-A", ".")
        git(root, "commit", "-qm", f"commit {i}")
        ids.append(git(root, "rev-parse", "HEAD"))
    return ids


def test_bisect_by_counters_finds_the_commit_that_added_an_op_skipping_a_broken_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    ids = _repository(
        root,
        10,
        {
            0: {"pytest.ini": FAST_INI, "test_model.py": MODEL.format(extra="")},
            # Commit 4 breaks the test module (a skip); commit 5 repairs it.
            4: {"test_model.py": "this is not python\n"},
            5: {"test_model.py": MODEL.format(extra="")},
            # Commit 7 adds an op: the counters change from here on.
            7: {"test_model.py": MODEL.format(extra=" * 1.0")},
        },
    )
    monkeypatch.chdir(root)
    monkeypatch.setenv("COLUMNS", "200")
    code = cli.main(["bisect", ids[0], ids[-1], "-k", "test_net", "--mode", "counters"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"first bad commit: {ids[7]} commit 7" in out, out
    assert f"BAD  {ids[-1][:10]}: net: ops changed" in out, out
    assert "net: ops changed: " in out and "aten::mul" in out, out
    assert f"last good: {ids[6][:10]} commit 6" in out, out
    assert "skip: the tests did not run (interrupted or a collection error" in out, out
    assert "(+ GOOD and BAD)" in out and "every worktree removed" in out
    # No worktree, no branch, no change left behind.
    assert git(root, "worktree", "list").count("\n") == 0
    assert len(git(root, "branch", "--list").splitlines()) == 1
    assert git(root, "status", "--porcelain") == "" and git(root, "rev-parse", "HEAD") == ids[-1]


def test_bad_revisions_are_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    ids = _repository(
        root, 3, {0: {"pytest.ini": FAST_INI, "test_model.py": MODEL.format(extra="")}}
    )
    monkeypatch.chdir(root)
    assert cli.main(["bisect", ids[2], ids[0], "-k", "net", "--mode", "counters"]) == 2
    assert "is not an ancestor of BAD" in capsys.readouterr().err
    assert cli.main(["bisect", "nonsense", ids[2], "-k", "net", "--mode", "counters"]) == 2
    assert "bisect: unknown git revision 'nonsense'" in capsys.readouterr().err
    # Unchanged code between GOOD and BAD: nothing to bisect, said before any step.
    assert cli.main(["bisect", ids[0], ids[2], "-k", "net", "--mode", "counters"]) == 2
    assert "nothing to bisect by counters" in capsys.readouterr().err
    assert cli.main(["bisect", ids[0], ids[2]]) == 2  # cannot start: no tests selected
    assert "select the perf tests" in capsys.readouterr().err


def test_the_first_bad_commit_is_found_exactly_for_every_position(tmp_path: Path) -> None:
    """32 commits; a probe whose counters change from commit ``first`` on, for every ``first``:
    exact in at most 5 steps (+ GOOD and BAD). With skipped commits, the candidates are named."""
    root = tmp_path / "repo"
    ids = _repository(root, 33, {})  # ids[0] is GOOD; 32 commits after it
    position = {commit: i for i, commit in enumerate(ids)}
    target = Target("counters", ("-k", "x"), root)

    def prober(first: int, untestable: range = range(0)) -> Callable[..., Probe]:
        def run(_t: Target, commit: str, subject: str, classify: Classify | None) -> Probe:
            i = position[commit]
            if i in untestable:
                return Probe(commit, subject, "skip", "the tests did not run")
            figures = {("t.py::test_x", "x"): {"ops": {"aten::mm": 2 if i >= first else 1}}}
            if classify is None:  # GOOD and BAD, measured for the judge
                return Probe(commit, subject, "measured", "", figures)
            verdict, detail = classify(figures)
            return Probe(commit, subject, verdict, detail, figures)

        return run

    for first in range(1, 33):
        found = bisect(target, ids[0], ids[-1], say=lambda _line: None, run=prober(first))
        assert found.first_bad.commit == ids[first] and not found.skipped_between, first
        assert found.last_good.commit == ids[first - 1]
        assert len(found.steps) <= 5, first
        assert "aten::mm 1 -> 2" in found.first_bad.detail

    # Commits 10-12 cannot be tested and the first bad one is 12: it is among 10-13.
    found = bisect(target, ids[0], ids[-1], say=lambda _line: None, run=prober(12, range(10, 13)))
    assert found.first_bad.commit == ids[13]
    assert found.skipped_between == (ids[10], ids[11], ids[12])
    assert found.last_good.commit == ids[9]
    with pytest.raises(BisectError, match="not an ancestor"):
        bisect(target, ids[5], ids[2], say=lambda _line: None, run=prober(3))


def test_by_instructions_a_commit_that_made_it_faster_is_not_the_bad_one() -> None:
    """Halfway from GOOD's count to BAD's decides, for the measurements BAD made slower: one
    that got faster does not make a revision bad, and BAD faster than GOOD is nothing to bisect."""
    from pytest_torchperf.run.revision_probe import mode_named

    good = {("t", "slow"): 1.0e6, ("t", "fast"): 2.0e6}
    bad = {("t", "slow"): 1.03e6, ("t", "fast"): 1.0e6}
    classify = mode_named("instructions").classifier(good, bad)
    assert classify({("t", "slow"): 1.0e6, ("t", "fast"): 1.0e6})[0] == "good"
    assert classify({("t", "slow"): 1.02e6, ("t", "fast"): 2.0e6})[0] == "bad"
    assert classify({("t", "slow"): 1.01e6, ("t", "fast"): 2.0e6})[0] == "good"
    with pytest.raises(BisectError, match="does not count 0.2 % or more instructions"):
        mode_named("instructions").classifier({("t", "x"): 2.0e6}, {("t", "x"): 1.0e6})
