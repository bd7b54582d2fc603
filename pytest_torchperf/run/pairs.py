"""One process pair of an A/B run: side A's and side B's pytest processes started together,
taking turns (:mod:`pytest_torchperf.measure.turns`), this process handing the token back and forth
as :class:`pytest_torchperf.run.duet.TurnScheduler` decides. Pytest-free, no torch.

Each side runs ``<its python> <args> --torchperf-child FILE``; its end of the turn protocol is a
pair of pipes whose file descriptors it inherits (:data:`~pytest_torchperf.measure.turns.
TURN_FDS_ENV`), and what it measured is read back from FILE (:func:`pytest_torchperf.run.duet.
read_side`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_torchperf.measure.turns import CPUS_ENV, PAIR_ENV, SIDE_ENV, TURN_FDS_ENV
from pytest_torchperf.run.duet import Key, SideLine, TurnScheduler, read_side
from pytest_torchperf.run.sides import Side

#: A pair whose children go silent this long (no turn given back) is stopped.
PAIR_TIMEOUT_S = 3600.0


def run_pair(
    args: Sequence[str],
    sides: Mapping[str, Side],
    number: int,
    only: Sequence[str] | None,
    cpus: Sequence[int],
) -> tuple[dict[Key, SideLine], dict[Key, SideLine], list[str]]:
    """Run pair ``number``: ``<side python> <args>`` for side A and side B taking turns (only
    the tests ``only`` names, when given); each side's measurements and the problems met."""
    folder = Path(tempfile.mkdtemp(prefix="torchperf-ab-pair-"))
    procs: dict[str, Any] = {}
    pipes: dict[str, tuple[_Lines, int]] = {}  # side -> (its lines, the fd we write "go" to)
    problems: list[str] = []
    try:
        for name, side in sides.items():
            to_child_r, to_child_w = os.pipe()
            from_child_r, from_child_w = os.pipe()
            command = [
                side.python,
                *args,
                "--torchperf-child",
                str(folder / f"{name}.jsonl"),
                "--junitxml=",
                "-p",
                "no:cacheprovider",
                *[f"--torchperf-ab-only={nodeid}" for nodeid in only or ()],
            ]
            env = {
                **os.environ,
                **side.env,
                TURN_FDS_ENV: f"{to_child_r},{from_child_w}",
                SIDE_ENV: name,
                PAIR_ENV: str(number),
                CPUS_ENV: ",".join(str(c) for c in cpus),
            }
            log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
            procs[name] = (
                subprocess.Popen(
                    command,
                    cwd=side.cwd,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    pass_fds=(to_child_r, from_child_w),
                ),
                command,
                log,
            )
            os.close(to_child_r)
            os.close(from_child_w)
            pipes[name] = (_Lines(from_child_r), to_child_w)
        _take_turns(TurnScheduler(), pipes, first="A" if number % 2 else "B")
        found = {}
        for name in sides:
            proc, command, log = procs[name]
            code = proc.wait()
            log.close()
            found[name] = read_side(folder / f"{name}.jsonl")
            if code not in (0, 1) or not found[name]:
                tail = (folder / f"{name}.log").read_text(errors="replace").strip().splitlines()
                problems.append(
                    f"torchperf: side {name} ({sides[name].label}), pair {number}: pytest exited "
                    f"with code {code} after measuring {len(found[name])} target(s). Command "
                    f"(in {sides[name].cwd}): {shlex.join(command)}\n    "
                    + "\n    ".join(tail[-15:])
                )
        return found["A"], found["B"], problems
    finally:
        for proc, _command, log in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
        for reader, write_fd in pipes.values():
            reader.close()
            with contextlib.suppress(OSError):
                os.close(write_fd)
        shutil.rmtree(folder, ignore_errors=True)


def _take_turns(scheduler: TurnScheduler, pipes: Mapping[str, tuple[Any, int]], first: str) -> None:
    """Hand the token between the two children until both have exited (see TurnScheduler)."""
    # Both start up and collect together (nothing is timed yet); each then says "ready".
    for name in pipes:
        message = pipes[name][0].message()
        if message is not None and "tests" in message:
            scheduler.tests[name] = set(message["tests"])
            message = pipes[name][0].message()
        if message is None or "ready" not in message:
            scheduler.exit(name)
    holder = scheduler.begin(first)
    while holder is not None:
        if not _go(pipes[holder][1]):
            holder = scheduler.exit(holder)
            continue
        while True:
            message = pipes[holder][0].message()
            if message is None:
                holder = scheduler.exit(holder)
                break
            if "tests" in message:
                scheduler.tests[holder] = set(message["tests"])
                continue
            if "at" in message:
                nodeid, name = message["at"]
                holder = scheduler.arrive(holder, (str(nodeid), str(name)))
                break


class _Lines:
    """A child's messages, one JSON object per line, read from its pipe without buffering past
    what ``select`` can see."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def message(self) -> dict[str, Any] | None:
        """The next message; None when the child exited (or went silent past the timeout)."""
        while b"\n" not in self.buffer:
            if self.closed:
                return None
            ready, _, _ = select.select([self.fd], [], [], PAIR_TIMEOUT_S)
            chunk = os.read(self.fd, 65536) if ready else b""
            if not chunk:
                self.closed = True
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            return {}
        return message if isinstance(message, dict) else {}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _go(write_fd: int) -> bool:
    try:
        os.write(write_fd, b"go\n")
        return True
    except OSError:  # it died meanwhile
        return False
