"""Child processes of the suite's end-to-end tests: git with a fixed identity, and an environment
that keeps the outer pytest run (its xdist worker, addopts, coverage) out of a child pytest or
``torchperf`` process."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def isolated_env(**extra: str) -> dict[str, str]:
    """This process's environment without the outer pytest's variables, test ids unshortened."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    env["COLUMNS"] = "200"
    return {**env, **extra}


def git(cwd: Path, *args: str, date: str | None = None) -> str:
    """``git ARGS`` in ``cwd`` as a fixed author (and at ``date``, ISO 8601, for commits);
    its stripped output. Raises on a failing command."""
    env = dict(os.environ)
    if date is not None:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(
        ["git", "-c", "user.name=dev", "-c", "user.email=dev@example.org", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
