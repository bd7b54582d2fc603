"""The docs are kept true where a check can tell: every link into a doc names a heading there (as
GitHub spells its anchor), the recipes work as written, the samples end as a run ends, and the
install lines name no dependency the package already brings."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.subprocesses import git

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "example_project" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
WORKFLOW = ROOT / "example_project" / ".github" / "workflows" / "perf.yml"


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``path``: the heading's text (code spans and
    links as their text), lower case, without punctuation but ``-`` and ``_``, each space a
    ``-``; a repeated one numbered (``-1``)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", text, re.M):
        words = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        anchor = re.sub(r"[^\w\- ]", "", words.strip().lower()).replace(" ", "-")
        found.add(f"{anchor}-{seen[anchor]}" if anchor in seen else anchor)
        seen[anchor] = seen.get(anchor, 0) + 1
    return found


def test_the_anchor_of_a_heading_is_githubs() -> None:
    heading = ROOT / "docs" / "reliability.md"
    assert "ab-runs---torchperf-ab" in _anchors(heading)  # "## A/B runs (`--torchperf-ab`)"


def test_every_link_into_a_doc_names_a_heading_there() -> None:
    """docs/ab.md linked `reliability.md#ab-runs-torchperf-ab`; GitHub's anchor of that heading
    is `#ab-runs---torchperf-ab`, so the link opened the page at its top."""
    broken = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)\s#]*)#([^)\s]+)\)", text):
            if target.startswith("http"):
                continue
            linked = (doc.parent / target) if target else doc
            if not linked.is_file() or anchor not in _anchors(linked):
                broken.append(f"{doc.relative_to(ROOT)}: ({target}#{anchor})")
    assert not broken


def _recipe_revisions() -> str:
    """The `git rev-list ...` of docs/history.md's "past commits" loop."""
    text = (ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    found = re.search(r"for c in \$\((git rev-list [^)]*)\)", text)
    assert found, "docs/history.md's past-commits loop is gone"
    return found.group(1)


def test_the_past_commits_recipe_works_in_a_repository_of_few_commits(tmp_path: Path) -> None:
    """Its `git rev-list --reverse --first-parent HEAD~9..HEAD` failed (`unknown revision`) in
    a repository of fewer than ten commits: someone trying the plugin out on a new one."""
    git(tmp_path, "init", "-q")
    for i in range(3):
        git(tmp_path, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    listed = subprocess.run(
        shlex.split(_recipe_revisions()), cwd=tmp_path, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    oldest_first = git(tmp_path, "rev-list", "--reverse", "HEAD").split()
    assert listed.stdout.split() == oldest_first
    for i in range(3, 12):
        git(tmp_path, "commit", "-q", "--allow-empty", "-m", f"c{i}")
    recent = subprocess.run(
        shlex.split(_recipe_revisions()), cwd=tmp_path, capture_output=True, text=True
    )
    assert recent.stdout.split() == git(tmp_path, "rev-list", "--reverse", "HEAD").split()[-10:]


def test_the_readmes_summary_sample_ends_as_a_run_ends() -> None:
    """The README's summary sample ended at `torchperf: 1 pass`; every run also prints what it
    gated (tests/e2e/test_instruments.py checks the line on a real run)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (sample,) = re.findall(r"```\n(=+ torchperf =+\n.*?)```", readme, re.S)
    last = sample.splitlines()[-2:]
    assert last[0] == "torchperf: 1 pass", sample
    assert last[1].startswith("torchperf: compared 1 measurement: timing judged for 1 of 1, "), (
        sample
    )


def _core_dependencies() -> set[str]:
    """The names in pyproject.toml's `dependencies` (tomllib is not in Python 3.10)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block, "pyproject.toml has no dependencies list"
    listed = re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)
    return {re.split(r"[<>=!~; \[]", d, maxsplit=1)[0].lower() for d in listed}


@pytest.mark.parametrize("doc", [*DOCS, WORKFLOW], ids=lambda p: p.name)
def test_no_install_line_names_a_core_dependency_again(doc: Path) -> None:
    """docs/ci.md's merge job installed `pandas` beside the package, which depends on it."""
    core = _core_dependencies()
    assert "pandas" in core
    again = [
        line.strip()
        for line in doc.read_text(encoding="utf-8").splitlines()
        if "pip install" in line
        and core & {w.lower() for w in shlex.split(line.split("pip install", 1)[1].split("#")[0])}
    ]
    assert not again


def test_the_module_files_keys_are_documented(tmp_path: Path) -> None:
    """docs/file-formats.md's module file had no `environment_id` or `module`, which every
    module file holds."""
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.sessions import Session

    store = BaselineStore(tmp_path)
    session = Session.from_json({"statistic": 1e-3, "times": [1e-3]})
    path = store.record("cpu-x-t1-0", {}, "tests/test_m.py::test_a", "a", session)
    text = (ROOT / "docs" / "file-formats.md").read_text(encoding="utf-8")
    documented = re.search(r"- \*\*Module file\*\*: `(\{.*?\})`", text, re.S)
    assert documented, "docs/file-formats.md describes no module file"
    keys = json.loads(path.read_text(encoding="utf-8"))
    assert [k for k in keys if f'"{k}":' not in documented.group(1)] == []
