"""``torchperf history`` and ``torchperf bisect`` on the shipped example project over commits.

    python benchmarks/example_over_time.py                     # everything, about 30 minutes
    python benchmarks/example_over_time.py --only bisect-counters,history-plain
    python benchmarks/example_over_time.py --json benchmarks/results/example-over-time-2cpu.json
    python benchmarks/example_over_time.py --only history-plain --keep /tmp/over-time

Builds, in a temporary folder, the repository tests/test_example_over_time.py builds (the files
of ``git ls-files example_project``, in that subfolder, ``--commits`` commits one day apart) but
with the example README's own "Break a model on purpose" change at commit ``--slow-at``: the
first layer of ``TinyMLP`` computed twice (about +30 % time and instructions). Then, from the
project folder, as a user would:

* ``history-plain``: one plain run of ``pytest -k mlp_batch`` per commit (one process, its
  ``--torchperf-json`` file kept), then ``torchperf history`` over the files;
* ``history-save``: a save per commit instead (five processes: what the example's workflow
  keeps from main);
* ``history-instructions``: an instruction-count run per commit (``--torchperf-instructions``);
* ``bisect-counters``, ``bisect-instructions``, ``bisect-ab``:
  ``torchperf bisect FIRST LAST -k mlp_batch --mode MODE``.

Prints, for each, whether the step (history) or the first bad commit (bisect) was named at the
commit that made the change, and the wall time; exit status 1 when one named another commit.
With ``--keep DIR`` the repository (``DIR/clone``) and each part's results files
(``DIR/out/<part>/``) stay.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_example_over_time import example_repository  # noqa: E402

#: The example README's change (section "Break a model on purpose").
README_BREAK = """        torch.relu(self.net[0](x))  # the MLP's first layer computed twice (README step 5)
        return self.net(x)
"""
PARTS = (
    "history-plain",
    "history-save",
    "history-instructions",
    "bisect-counters",
    "bisect-instructions",
    "bisect-ab",
)
STEP_LINE = re.compile(
    r"^(?P<test>\S+) (?P<name>\S+): (?P<change>[+-][\d.]+)% .* from run (?P<run>\d+) of \d+ on, "
    r"between commits (?P<before>\w+) and (?P<after>\w+)"
)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    env["COLUMNS"] = "200"
    return env


def _command(cwd: Path, *args: str) -> tuple[int, str, float]:
    started = time.perf_counter()
    proc = subprocess.run(
        args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=3600, check=False
    )
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - started


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def history(root: Path, ids: list[str], slow_at: int, kind: str, out: Path) -> dict[str, Any]:
    """One run of the MLP's test per commit, then ``torchperf history`` over their files."""
    project, folder = root / "example_project", out / kind
    extra = {
        "history-plain": [],
        "history-save": ["--torchperf-save", f"--torchperf-storage={out / 'storage'}"],
        "history-instructions": ["--torchperf-instructions"],
    }[kind]
    started, per_run = time.perf_counter(), []
    for i, commit in enumerate(ids):
        _git(root, "checkout", "-q", commit)
        code, text, took = _command(
            project,
            sys.executable,
            "-m",
            "pytest",
            "tests/test_perf.py",
            "-k",
            "mlp_batch",
            "-p",
            "no:cacheprovider",
            f"--torchperf-json={folder / f'run-{i:02d}.json'}",
            *extra,
        )
        per_run.append(round(took, 1))
        if code != 0:
            return {
                "ok": False,
                "error": f"run at commit {i} exited {code}",
                "output": text[-3000:],
            }
    _git(root, "checkout", "-q", ids[-1])
    code, text, _ = _command(
        project, sys.executable, "-m", "pytest_torchperf.cli", "history", str(folder)
    )
    steps = [m.groupdict() for m in map(STEP_LINE.match, text.splitlines()) if m]
    before, after = ids[slow_at - 1][:10], ids[slow_at][:10]
    found = {
        s["name"]: s
        for s in steps
        if float(s["change"]) > 0 and (s["before"], s["after"]) == (before, after)
    }
    return {
        "ok": True,
        "exact": sorted(found),
        "other_steps": [s for s in steps if s["name"] not in found or s is not found[s["name"]]],
        "runs": len(ids),
        "run_seconds": per_run,
        "wall_s": round(time.perf_counter() - started, 1),
        "output": text,
    }


def bisect(project: Path, ids: list[str], slow_at: int, mode: str) -> dict[str, Any]:
    code, text, took = _command(
        project,
        sys.executable,
        "-m",
        "pytest_torchperf.cli",
        "bisect",
        ids[0],
        ids[-1],
        "-k",
        "mlp_batch",
        "--mode",
        mode,
    )
    named = re.search(r"first bad commit: (\w+)", text)
    steps = re.search(r"torchperf bisect: (\d+) steps", text)
    return {
        "exit": code,
        "exact": bool(named and named.group(1) == ids[slow_at]),
        "named": named.group(1) if named else None,
        "steps": int(steps.group(1)) if steps else None,
        "wall_s": round(took, 1),
        "output": text,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--slow-at", type=int, default=6)
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="build the repository and the results files here (an empty or new folder) and "
        "keep them, to run torchperf history or bisect on them yourself",
    )
    args = parser.parse_args()
    parts = [p for p in args.only.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    figures: dict[str, Any] = {
        "commits": args.commits,
        "slow_at": args.slow_at,
        "change": README_BREAK.strip(),
        "cpu": os.cpu_count(),
    }
    failed = False
    with tempfile.TemporaryDirectory(prefix="torchperf-over-time-") as tmp:
        where = Path(args.keep) if args.keep else Path(tmp)
        if args.keep and where.exists() and any(where.iterdir()):
            parser.error(f"--keep {where}: the folder is not empty")
        root, out = where / "clone", where / "out"
        ids = example_repository(root, args.commits, args.slow_at, README_BREAK)
        for part in parts:
            kind, what = part.split("-", 1)
            if kind == "history":
                got = history(root, ids, args.slow_at, part, out)
                ok = got.get("ok") and got["exact"] == ["mlp-bs1", "mlp-bs64"]
                said = (
                    f"the step found at the slowing commit for "
                    f"{' and '.join(got['exact']) or 'neither measurement'} (of mlp-bs1, "
                    f"mlp-bs64), {len(got['other_steps'])} other steps; runs "
                    f"{min(got['run_seconds'])}-{max(got['run_seconds'])} s, {got['wall_s']} s"
                    if got.get("ok")
                    else got["error"]
                )
            else:
                got = bisect(root / "example_project", ids, args.slow_at, what)
                ok = got["exact"]
                said = (
                    f"named {'the' if ok else 'ANOTHER'} commit ({(got['named'] or 'none')[:10]}) "
                    f"in {got['steps']} steps, {got['wall_s']} s, exit {got['exit']}"
                )
            failed |= not ok
            figures[part] = got
            print(f"{part}: {said}", flush=True)
            if not ok:
                print(got.get("output", "")[-2000:], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
