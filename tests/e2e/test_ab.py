"""A/B runs: ``--torchperf-ab REV`` (a git revision against the working tree) and
``--torchperf-ab-python PYTHON`` (another interpreter), both sides measured in the same job in
process pairs taking turns.

Each run starts two fresh pytest processes per pair, so the module keeps to a few runs of tiny
models with a short ``min_time`` and two or three pairs; the slowdown is ~100 % or more and the
limit 30 %, so the verdicts are far from the limit on any machine (the statistics themselves are measured by
``benchmarks/reliability.py --mode ab``, not here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.e2e.helpers import cpu_hog

INI = """
[pytest]
torchperf_min_time = 0.3s
torchperf_warmup = 0.02s
"""

#: Version 1 (committed): the models as they were. ``LOOP`` extra pure-Python steps per call of
#: model "slow" in the working tree make it ~50 % or more slower without changing any counter.
MODELS = """
import pytest
import torch
from torch import nn

LOOP = 0


class Net(nn.Module):
    def __init__(self, loop=0):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
        self.loop = loop

    def forward(self, x):
        total = 0
        for i in range(self.loop):
            total += i
        return self.body(x)


def test_same(torchperf):
    torchperf(Net(), torch.randn(16, 64), name="same")


def test_slow(torchperf):
    torchperf(Net(LOOP), torch.randn(16, 64), name="slow")


def test_old_name(torchperf):
    torchperf(Net(), torch.randn(16, 64), name="renamed")


# The same on both sides; bf16 autocast's speedup varies by +-25 % between processes and the
# pairs' speedups are not confirmed again, so its speedup limit is far (a tenth of side A's).
@pytest.mark.torchperf(variants=["amp"], max_slowdown="900%")
def test_variant(torchperf):
    torchperf(Net(), torch.randn(16, 64), name="var")


def test_fixed(torchperf):
    raise RuntimeError("broken in version A")


# amp of a model with no autocast-eligible op cannot exist: both sides skip it, and so must the
# A/B run (not fail it as "not measured by side B").
@pytest.mark.torchperf(variants=["amp"])
def test_no_amp(torchperf):
    torchperf(nn.Sequential(nn.ReLU()), torch.randn(16, 64), name="relu")
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def _repository(root: Path, committed: dict[str, str], working: dict[str, str]) -> Path:
    """A git repository whose last commit holds ``committed`` and whose working tree has
    ``working`` written over it (not committed)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in committed.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "version A")
    for name, text in working.items():
        (root / name).write_text(text)
    return root


#: Two pairs first, a third where undecided (two pairs' t interval is 9 standard deviations
#: wide): the verdicts here are far from the limit (30 %).
PAIRS = ("--torchperf-ab-pairs", "2", "--torchperf-ab-max-pairs", "3")


def _run(
    root: Path,
    *args: str,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            python,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-rfs",
            *PAIRS,
            *args,
        ],  # fmt: skip
        cwd=root,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _records(path: Path) -> dict[str, dict]:
    """The file's records by measurement: its benchmarks', then those only side A has."""
    data = json.loads(path.read_text())
    timed = {b["torchperf"]["measurement"]: b["torchperf"] for b in data["benchmarks"]}
    return {**timed, **{r["name"]: r for r in data["torchperf"].get("removed") or ()}}


@pytest.mark.slow
def test_a_slower_working_tree_fails_only_that_test_even_beside_a_cpu_hog(
    tmp_path: Path,
) -> None:
    # 30,000 loop steps: "slow" runs some 30x slower. With 3,000 (about 3x) the CI run beside the
    # other worker's Valgrind tests read its two pairs +337 % and +150 %, an interval of
    # -91..+11488 % after 2 pairs that a third pair could not bring above the 30 % limit: the
    # test failed on an inconclusive verdict. Pair ratios spread by ~2x there, so the change
    # must be far larger than that for 2-3 pairs to decide it.
    slower = (
        MODELS.replace("LOOP = 0", "LOOP = 30000")
        .replace("def test_old_name", "def test_new_name")
        .replace(
            'raise RuntimeError("broken in version A")',
            'torchperf(Net(), torch.randn(16, 64), name="fixed")',
        )
    )
    root = _repository(
        tmp_path / "repo", {"test_models.py": MODELS, "pytest.ini": INI}, {"test_models.py": slower}
    )
    hog = cpu_hog()  # every block of either side is timed beside it
    try:
        result = _run(
            root,
            "--torchperf-ab",
            "HEAD",
            "--torchperf-max-slowdown",
            "30%",
            "--torchperf-json",
            "ab.json",
        )
    finally:
        hog.kill()
        hog.wait()
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 failed, 4 passed, 1 skipped" in out, out
    assert "relu[amp]: not measured: autocast ran no op" in out, out
    assert "FAILED test_models.py::test_slow" in out
    # The verdict: the change, its interval over the pairs, side A by revision and commit.
    assert "slow: +" in out and "(95% CI +" in out and "vs HEAD (" in out, out
    assert "limit 30%" in out
    assert "side A = HEAD (" in out and "side B = working tree" in out
    # Renamed: new in B (this run's own test) and removed in B (side A's), neither an error.
    assert "removed in B: test_models.py::test_old_name renamed" in out, out
    records = _records(root / "ab.json")
    # Unchanged beside a hog: never a failure (inconclusive when the hogs split the pairs;
    # improved if they happened to slow side A's processes of every pair).
    assert records["same"]["outcome"] in ("pass", "improved", "inconclusive"), records["same"][
        "verdict"
    ]
    assert records["slow"]["outcome"] == "fail"
    # Both tests measure "renamed": the file holds each, by its test.
    document = json.loads((root / "ab.json").read_text())
    sections = [
        *(b["torchperf"] for b in document["benchmarks"]),
        *document["torchperf"].get("removed", ()),  # side A's only: no benchmark
    ]
    renamed = {s["nodeid"]: s for s in sections if s.get("measurement", s.get("name")) == "renamed"}
    assert renamed["test_models.py::test_new_name"]["outcome"] == "new"
    assert renamed["test_models.py::test_old_name"]["outcome"] == "removed"
    # What torchperf bisect --mode ab reads of a revision's run: this one is bad.
    from pytest_torchperf.run.revision_probe import figures_of, mode_named

    by_name = {name: figure for (_, name), figure in figures_of("ab", root / "ab.json").items()}
    assert by_name["slow"][0] == "fail" and by_name["slow"][1].startswith(" (+"), by_name
    assert mode_named("ab").classifier({}, {})(by_name)[0] == "bad"
    # A variant is judged per variant, both sides' speedups compared (bf16 autocast on CPU).
    variant = records["var[amp]"]
    assert variant["outcome"] in ("pass", "improved", "inconclusive"), variant["verdict"]
    assert variant["ab"]["pairs"] and variant["speedup"]
    assert variant["ab"]["a_sessions"][0]["speedup"]
    assert "new in B" in renamed["test_models.py::test_new_name"]["verdict"]["message"]
    # Broken on side A: not "new in B" (that would pass a test the base branch cannot run).
    assert records["fixed"]["outcome"] == "inconclusive", records["fixed"]["verdict"]
    assert "side A (HEAD (" in records["fixed"]["verdict"]["message"]
    assert "broken in version A" in out  # side A's own output, printed before the tests
    assert len(records["slow"]["ab"]["pairs"]) >= 2
    assert records["slow"]["ab"]["interval"]["low"] > 0.30
    # No worktree is left behind.
    worktrees = subprocess.run(
        ["git", "worktree", "list"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert len(worktrees.strip().splitlines()) == 1, worktrees
    # The results file replays to the same verdicts, without a baseline folder.
    replay = subprocess.run(
        [sys.executable, "-m", "pytest_torchperf.cli", "compare", ".torchperf", "ab.json"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "slow: +" in replay.stdout and "1 fail" in replay.stdout, replay.stdout


SRC_MODEL = """
import torch
from torch import nn

LOOP = 0


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))

    def forward(self, x):
        total = 0
        for i in range(LOOP):
            total += i
        return self.body(x)
"""

SRC_TEST = """
import torch
from mypkg.model import Net


def test_model(torchperf):
    torchperf(Net(), torch.randn(16, 64), name="model")
"""

SETUP = """
from setuptools import setup, find_packages
setup(name="mypkg", version="0", packages=find_packages("src"), package_dir={"": "src"})
"""


@pytest.fixture(scope="module")
def second_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second environment that sees this one's packages (torch, pytest, the plugin)."""
    folder = tmp_path_factory.mktemp("venv")
    try:
        venv.EnvBuilder(system_site_packages=True, with_pip=False).create(folder)
    except Exception as exc:  # noqa: BLE001 - some Pythons ship without venv support
        pytest.skip(f"cannot build a second venv here: {exc}")
    python = folder / "bin" / "python"
    check = subprocess.run(
        [str(python), "-c", "import torch, pytest_torchperf"], capture_output=True, text=True
    )
    if check.returncode != 0:
        pytest.skip(f"the second venv cannot import torch and the plugin: {check.stderr[-300:]}")
    return python


@pytest.mark.slow  # process pairs: 40-50 s
def test_src_layout_installed_editable_imports_each_sides_own_code(
    tmp_path: Path, second_venv: Path
) -> None:
    """The package is installed editable from the main checkout; side A must still time the
    revision's code (else both sides would be slow and the slowdown would pass)."""
    root = _repository(
        tmp_path / "proj",
        {
            "src/mypkg/__init__.py": "",
            "src/mypkg/model.py": SRC_MODEL,
            "tests/test_model.py": SRC_TEST,
            "setup.py": SETUP,
            "pytest.ini": INI,
        },
        {"src/mypkg/model.py": SRC_MODEL.replace("LOOP = 0", "LOOP = 3000")},
    )
    install = subprocess.run(
        [str(second_venv), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "-e", str(root)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if install.returncode != 0:
        pytest.skip(f"pip install -e failed here: {install.stderr[-400:]}")
    result = _run(
        root,
        "--torchperf-ab",
        "HEAD",
        "--torchperf-max-slowdown",
        "30%",
        python=str(second_venv),
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "FAILED tests/test_model.py::test_model" in out, out
    assert "model: +" in out and "(95% CI +" in out


@pytest.mark.slow  # process pairs: 40-50 s
def test_ab_python_compares_two_environments_on_the_working_tree(
    tmp_path: Path, second_venv: Path
) -> None:
    root = _repository(tmp_path / "repo", {"test_models.py": MODELS, "pytest.ini": INI}, {})
    result = _run(
        root,
        f"--torchperf-ab-python={second_venv}",  # '=': a path outside the repo (docs/options.md)
        "--torchperf-max-slowdown",
        "30%",
        "-k",
        "same",
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "1 passed" in out, out
    assert f"side A = {second_venv} (torch " in out, out
    assert "side B = working tree (torch " in out


# -- bad input: one clear error naming the side and the fix -----------------------------------


#: Version A of the renamed-test run: ``gone`` is renamed ``new`` in the working tree, and
#: ``keep``'s model computes with another op there (its counters change, so it fails whatever
#: its timing reads).
RENAMED = """
import pytest
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 32)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.mark.torchperf(name="keep")
def test_keep():
    MLP()(torch.randn(8, 32))


@pytest.mark.torchperf(name="gone")
def test_gone():
    nn.Linear(32, 32)(torch.randn(8, 32))
"""


@pytest.mark.slow  # process pairs: 20-30 s
def test_a_measurement_removed_in_b_reads_so_in_every_report_and_the_replay(
    tmp_path: Path,
) -> None:
    working = RENAMED.replace("torch.relu", "torch.tanh").replace("gone", "new")
    root = _repository(
        tmp_path / "repo",
        {"test_renamed.py": RENAMED, "pytest.ini": INI},
        {"test_renamed.py": working},
    )
    result = _run(
        root, "--torchperf-ab", "HEAD", "--torchperf-json=ab.json", "--torchperf-markdown=ab.md"
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    # Side A's measurement is removed in B, not new: its row, the count and the summary say so.
    # (Its row, in the table's flat layout or under its test's line.)
    assert re.search(r"^\s*(test_renamed\.py::test_gone\s+)?gone\s.*\sremoved in B$", out, re.M), (
        out
    )
    assert "torchperf: 1 fail, 1 new, 1 removed in B" in out, out
    assert "removed in B: test_renamed.py::test_gone gone" in out, out
    markdown = (root / "ab.md").read_text()
    assert "## torchperf: 1 fail, 1 new, 1 removed in B" in markdown, markdown
    assert "removed in B | `test_renamed.py::test_gone` | gone |" in markdown, markdown
    # The results file holds it, with side A's record, and what gated nothing is not counted.
    document = json.loads((root / "ab.json").read_text())
    records = _records(root / "ab.json")
    assert records["gone"]["outcome"] == "removed", records["gone"]
    assert records["gone"]["ab"]["one_sided"] == "A"
    assert records["gone"]["label"] == "removed in B"
    assert document["torchperf"]["coverage"]["measurements"] == 2
    # No benchmark of pytest-benchmark's: one without stats made it drop the whole file.
    assert "gone" not in {b["torchperf"]["measurement"] for b in document["benchmarks"]}
    if shutil.which("pytest-benchmark"):
        read = subprocess.run(
            ["pytest-benchmark", "compare", "ab.json"], cwd=root, capture_output=True, text=True
        )
        assert "Failed to load" not in read.stdout + read.stderr, read.stdout + read.stderr
    # New in B: its time in B, not a placeholder.
    message = records["new"]["verdict"]["message"]
    assert "per call in B" in message and "?" not in message, message
    assert records["new"]["verdict"]["candidate_statistic"], records["new"]["verdict"]
    # The replay says what the run said, counter change included.
    replay = subprocess.run(
        [sys.executable, "-m", "pytest_torchperf.cli", "compare", ".torchperf", "ab.json"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    said = replay.stdout + replay.stderr
    assert replay.returncode == 1, said
    assert "torchperf: 1 fail, 1 new, 1 removed in B" in said, said
    assert "gone: removed in B: only side A (HEAD (" in said, said
    assert "keep: counters changed in B vs side A: ops changed" in said, said
    assert message in said, said


def test_outside_a_git_repository(tmp_path: Path) -> None:
    (tmp_path / "test_models.py").write_text(MODELS)
    result = _run(tmp_path, "--torchperf-ab", "origin/main")
    out = result.stdout + result.stderr
    assert result.returncode == 4, out
    # A usage error before collection, like the others: no pytest.exit banner, no tests.
    assert "ERROR: torchperf: --torchperf-ab checks out a git revision" in out, out
    assert "_pytest.outcomes.Exit" not in out and "collected" not in out, out
    assert "is not in a git repository" in result.stdout + result.stderr
    assert "--torchperf-ab-python" in result.stdout + result.stderr


def test_unknown_revision_names_the_fix(tmp_path: Path) -> None:
    root = _repository(tmp_path / "repo", {"test_models.py": MODELS}, {})
    result = _run(root, "--torchperf-ab", "origin/nope")
    out = result.stdout + result.stderr
    assert result.returncode == 4, out
    assert "ERROR: torchperf: side A: unknown git revision 'origin/nope'" in out, out
    assert "_pytest.outcomes.Exit" not in out and "collected" not in out, out
    assert "fetch-depth: 0" in out
    assert "Traceback" not in out


@pytest.mark.slow
def test_revision_whose_tests_do_not_import(tmp_path: Path) -> None:
    broken = MODELS.replace("import torch\n", "import torch\nimport not_a_module_anywhere\n", 1)
    root = _repository(
        tmp_path / "repo", {"test_models.py": broken, "pytest.ini": INI}, {"test_models.py": MODELS}
    )
    result = _run(root, "--torchperf-ab", "HEAD", "-k", "same")
    out = result.stdout + result.stderr
    assert result.returncode == 4, out
    assert "side A (HEAD (" in out and "could not run its tests" in out, out
    assert "not_a_module_anywhere" in out  # the end of side A's own output


def test_python_without_torch_or_the_plugin(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(bare)
    root = _repository(tmp_path / "repo", {"test_models.py": MODELS}, {})
    result = _run(root, f"--torchperf-ab-python={bare / 'bin' / 'python'}")
    out = result.stdout + result.stderr
    assert result.returncode == 4, out
    assert "side A:" in out and "cannot import torch" in out and "pip install" in out, out
    assert "ERROR: torchperf: side A:" in out and "_pytest.outcomes.Exit" not in out, out


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--torchperf-save"], "stores nothing"),
        (["--torchperf-compare"], "instead of stored baselines"),
        (["--torchperf-processes", "3"], "--torchperf-ab-pairs"),
        (["--torchperf-ab-python", "python3"], "both name a side A"),
        (["--torchperf-ab-pairs", "1"], "from 2 to 30"),
    ],
)
def test_combinations_that_cannot_work(tmp_path: Path, extra: list[str], expected: str) -> None:
    (tmp_path / "test_models.py").write_text(MODELS)
    result = _run(tmp_path, "--torchperf-ab", "HEAD", *extra)
    out = result.stdout + result.stderr
    assert result.returncode == 4, out
    assert expected in out, out
