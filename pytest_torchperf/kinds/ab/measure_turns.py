"""Taking turns with the other side of an A/B run: the child's end of the protocol.

In an A/B run (``--torchperf-ab``) two child pytest processes, side A and side B, measure the
same tests, and must never run at the same time: on a 2-core runner they would share a core and
the caches, and a difference between them would be the machine's, not the code's. The controlling
run holds a token and hands it to one side at a time (:mod:`pytest_torchperf.kinds.ab.run_data`).
A side runs only while it holds the token: both start up and collect their tests at the same time
(nothing is timed yet), then say ``ready`` and wait; from then on a side runs (builds models,
warms up, times) only until its next timed block, where it gives the token back and waits. So the
two sides' blocks of one measurement alternate, A, B, A, B, ..., and whatever the machine does in
those seconds hits both.

The protocol (its messages: :mod:`pytest_torchperf.core.child_protocol`, one line each): to the
controller, which tests this side runs (``PerfTests``), that it is ready (``Ready``), where it
waits (``At``) and that it is done (``Bye``); back from it, first which collected tests to run
(``Only``: a pair started ahead, while the pair before it measures, learns it only once that pair
has shown what is still undecided), then ``Go`` each time it is this side's turn. The pipe's file
descriptors come in :data:`TURN_FDS_ENV`. No torch, no pytest.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import NoReturn

from pytest_torchperf.core.child_protocol import (
    At,
    Bye,
    Go,
    Message,
    MessageError,
    Only,
    PerfTests,
    Ready,
    decode,
    encode,
)

#: ``"<read fd>,<write fd>"`` of the child's pipes to the controller.
TURN_FDS_ENV = "PYTEST_TORCHPERF_AB_FDS"
#: ``A`` or ``B``: which side this child is.
SIDE_ENV = "PYTEST_TORCHPERF_AB_SIDE"
#: Comma-separated CPUs both sides are pinned to (empty: not pinned).
CPUS_ENV = "PYTEST_TORCHPERF_AB_CPUS"
#: The pair number of this child (1, 2, ...), for its lines.
PAIR_ENV = "PYTEST_TORCHPERF_AB_PAIR"


def _controller_gone() -> NoReturn:
    """The controlling run closed the pipe (interrupted, a cancelled CI job): stop at once.
    Going on would time the remaining tests unsynchronised, beside whatever runs next."""
    os._exit(3)


class TurnClient:
    """This side's end of the turn protocol (see the module docstring)."""

    def __init__(
        self, read_fd: int, write_fd: int, side: str, pair: int = 1, cpus: set[int] | None = None
    ) -> None:
        self._in = os.fdopen(read_fd, "r", encoding="utf-8")
        self._out = os.fdopen(write_fd, "w", encoding="utf-8", buffering=1)
        self.side = side
        self.pair = pair
        #: The CPUs both sides are pinned to on their turns (empty: not pinned).
        self.cpus = cpus or set()
        #: The CPUs this process could use before its first turn pinned it (:meth:`bye` moves
        #: onto those of them the sides do not share; once pinned, its own affinity is
        #: :attr:`cpus` alone).
        self.unpinned: set[int] = set()

    @classmethod
    def from_environment(cls) -> TurnClient | None:
        """The client of a child started for an A/B run; None in any other process."""
        fds = os.environ.get(TURN_FDS_ENV)
        if not fds:
            return None
        read_fd, write_fd = (int(fd) for fd in fds.split(","))
        return cls(
            read_fd,
            write_fd,
            os.environ.get(SIDE_ENV, "?"),
            int(os.environ.get(PAIR_ENV, "1") or 1),
            {int(c) for c in os.environ.get(CPUS_ENV, "").split(",") if c.strip()},
        )

    def _send(self, message: Message) -> None:
        try:
            self._out.write(encode(message) + "\n")
        except (BrokenPipeError, OSError):
            _controller_gone()

    def _receive(self) -> Message:
        """The controller's next message; end of file or a line that is none: it is gone."""
        try:
            return decode(self._in.readline())
        except MessageError:
            _controller_gone()

    def _wait(self) -> None:
        if not isinstance(self._receive(), Go):
            _controller_gone()

    def selection(self) -> list[str] | None:
        """The collected tests the controller wants run (None: all of them). Read once, after
        collection and before :meth:`ready`; blocks until the controller says."""
        message = self._receive()
        only = message.nodeids if isinstance(message, Only) else None
        return None if only is None else list(only)

    def ready(self) -> None:
        """Say this side has collected its tests, wait for the first turn, and from then on
        run on the CPUs both sides share. (Pinned only now: both start up at the same time,
        on every CPU. Threads torch starts later inherit the pinning; with the default one
        thread per measurement there are none before. So do processes it starts later: the
        tests, compiles included, run only from here on, and inductor compiles in this process
        (``run_pairs.COMPILE_THREADS``).)"""
        self._send(Ready(self.side))
        self._wait()
        if self.cpus:
            self.unpinned = allowed_cpus()
            place(self.cpus)

    def bye(self, exitstatus: int) -> None:
        """This side measured and reported everything: give the turn back for good (saying
        its exit status), and leave the shared CPUs to the other side for the rest of this
        process's life (on the CPUs the sides do not share, when there are any)."""
        # Not allowed_cpus(): pinned, this process may use only the shared CPUs, and the
        # teardown stayed on them, beside the next pair's turns.
        others = self.unpinned - self.cpus
        if others:
            place(others)
        self._send(Bye(self.side, exitstatus))

    def tests(self, nodeids: Sequence[str]) -> None:
        """Tell the controller which tests this side will run (no turn is given back)."""
        self._send(PerfTests(tuple(nodeids)))

    def take(self, nodeid: str, name: str) -> None:
        """Give the turn back before a timed block of ``(nodeid, name)``; return on our turn."""
        self._send(At(nodeid, name))
        self._wait()


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (a container or taskset may allow fewer than exist)."""
    if hasattr(os, "sched_getaffinity"):
        with contextlib.suppress(OSError):
            return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def place(cpus: set[int], pid: int | None = None) -> None:
    """Set the CPUs of every thread of process ``pid`` (None: this one) where the system lets
    us: Linux sets one thread's per call, and a process started ahead of its pair was placed
    off the shared CPUs as a whole. A container may forbid it; the turns still keep the sides
    apart."""
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        threads = [int(tid) for tid in os.listdir(f"/proc/{pid or 'self'}/task")]
    except OSError:
        threads = [pid or 0]
    for tid in threads:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)
