"""A revision checked out in a temporary git worktree: what its processes import."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import pytest_torchperf
from pytest_torchperf.run.worktree import _mapped_pythonpath


def test_a_checkout_imports_the_users_code_from_itself_but_never_the_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Import roots inside the repository point into the checkout, except the plugin's own: both
    sides (every revision of a bisection) must run this plugin, also when the repository is the
    plugin's."""
    home = Path(pytest_torchperf.__file__).resolve().parents[1]
    checkout = tmp_path / "a"
    (checkout / "tests").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(home), str(home / "tests"), str(tmp_path / "elsewhere")])
    monkeypatch.setattr(sys, "meta_path", [])
    monkeypatch.setenv("PYTHONPATH", "/kept")
    mapped = _mapped_pythonpath(home, checkout).split(os.pathsep)
    assert mapped == [str(checkout / "tests"), "/kept"]
