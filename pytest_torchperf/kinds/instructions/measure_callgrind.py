"""Counting a call's instructions under Valgrind's callgrind, from inside the counted process.

How (each step measured on this project's 2-vCPU CI VM, Valgrind 3.19, torch 2.14):

- The process runs under ``valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no``
  (:func:`valgrind_command`): ``import torch`` and model construction run uninstrumented, which
  keeps start-up near 40 s of CPU instead of about 120 s with instrumentation from the start.
- :func:`count_instructions` runs warm-up calls uninstrumented, switches instrumentation on for
  this process (``callgrind_control -i on <pid>``), counts one probe call to size the windows,
  then counts a settling window and the two windows that are compared: collection is toggled
  around each window by ``torch._C._valgrind_toggle()`` and each window dumps its own profile
  (``torch._C._valgrind_toggle_and_dump_stats()``). Instrumentation is switched off again
  afterwards so the next test's set-up runs at the uninstrumented speed.
- Uninstrumented code under Valgrind runs a few times slower than natively, instrumented code
  some 100x slower, so the cost is in the counted calls; on x86 the process runs oneDNN and MKL
  below their FMA kernels (:data:`KERNEL_CAPS`), which Valgrind emulates 10-100x more slowly.
- Each window's total is read from its dump, and the self counts per function of the window
  every verdict compares with ``callgrind_annotate``
  (:func:`pytest_torchperf.kinds.instructions.measure_callgrind_output.parse_annotate`, pure).

Valgrind does not emulate AVX-512 or AMX: under it torch dispatches to AVX2 kernels, so counts
describe those kernels on any host; they are a stable proxy for work, not a prediction of native
time. Inductor's cache must not be shared with native runs (kernels built for the host's ISA were
seen to give wrong outputs under Valgrind): :func:`valgrind_command` callers give the child its own
``TORCHINDUCTOR_CACHE_DIR``.
"""

from __future__ import annotations

import gc
import math
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_torchperf.kinds.instructions.measure_callgrind_output import (
    CallgrindError,
    parse_annotate,
    profile_total,
)

#: Environment variable naming the folder the counted process dumps its profiles into; set by
#: whoever starts the process under Valgrind (its presence means "you are being counted").
DUMP_DIR_ENV = "PYTEST_TORCHPERF_CALLGRIND_DIR"
#: Uncounted, uninstrumented calls before the windows. The first calls of a model keep changing
#: what they execute (lazy initialisation, allocator caches, Python 3.11's adaptive interpreter
#: specialising the bytecode): a 200 k-instruction MLP's two windows disagreed by 1.4 % after 2
#: warm-up calls, 0.13 % after 30 and 0.03 % after 100. Uninstrumented calls are cheap: under
#: callgrind with instrumentation off the example project's autoencoder (5.8 M instructions per
#: call) made its 100 warm-up calls in 0.3 s of CPU.
WARMUP_CALLS = 100
#: ... but no longer than this many CPU seconds: 6 calls of ResNet-18 at 224x224, 15 of
#: MobileNetV3 (example project). Their windows then agreed within 0.002 % and their counts were
#: within 0.01 % of counts after a 20 s warm-up (19 and 58 calls), which took 30 s more per run.
#: (Before oneDNN and MKL were capped below FMA, a 3 s cap meant a single call of a convnet, and
#: its windows disagreed by 0.105 %.)
WARMUP_SECONDS = 5.0
#: Counted windows before the two that are compared, each as long as they are. The first window
#: after the probe call counts more than the ones after it: 28-46 k instructions per call on the
#: example project (a dynamic int8 MLP of 60 M per call +0.047 %; a compiled variant of 28 M
#: +0.16 %, which made its verdict inconclusive), while the windows after it agreed within
#: 0.003 %. A single settling call is not enough for cheap calls: a 44 k-instruction Linear's two
#: 100-call windows after one then disagreed by 0.31 %. For calls of 100 M instructions or more
#: a window, and so the settling window, is one call.
SETTLING_WINDOWS = 1
#: Windows counted beyond the two compared where those disagree, each compared with the one
#: before it. Calls that repeat the same work still disagree now and then: a deep stack of 60
#: Linear+ReLU pairs (3.8 M instructions per call, 27 calls per window) read 3,804 k and 3,800 k
#: per call (0.12 %) in one save in three, and was refused as a baseline; a one-off cost in one
#: window (the allocator returning memory, a lookup cache refilled) does not come back in the
#: next, while work that varies from call to call disagrees again.
EXTRA_WINDOWS = 2
#: How far two compared windows may disagree before a count is not trusted (0.1 %) ...
WINDOW_AGREEMENT = 0.001
#: ... unless they differ by at most this many instructions per call, a twentieth of the
#: smallest change a verdict acts on (``judge_counts.MIN_CHANGE``), which cannot move one. Windows of cheap
#: calls differ by a few thousand instructions whatever their length: a 44 k-instruction Linear's
#: two 100-call windows read 44.0 k and 43.9 k per call (0.18 %, 80 instructions per call).
WINDOW_AGREEMENT_FLOOR = 400.0
#: Instructions each counted window aims for, and its bounds in calls. Instrumented calls are
#: what costs: about 150-200 M instructions per CPU second, some 100x slower than uninstrumented
#: ones (the dynamic int8 MLP of the example project, 60 M instructions per call: 0.024 s per
#: warm-up call, 0.33 s per counted one), so windows are sized by a counted probe call, not by
#: the warm-up's time. Big calls repeat closely (1-call windows of ResNet-18, 712 M instructions
#: per call, within 0.007 %; of a compiled one at 8x112x112, 1.38 G, within 0.002 %), but
#: windows of cheap calls differ by a few thousand instructions whatever their length (about 7 k
#: on a 195 k-instruction MLP: -0.38 % per call with 10 calls per window, -0.036 % with 100), so
#: cheap calls get long windows: 100 M instructions make that 0.007 %.
WINDOW_INSTRUCTIONS = 100_000_000
MIN_WINDOW_CALLS = 1
MAX_WINDOW_CALLS = 100
#: Kernel ISA caps the counted process runs with on x86 (each where the user has not set it).
#: Valgrind emulates fused multiply-add, part of AVX2, far more slowly than other instructions,
#: and the AVX2 kernels of oneDNN and MKL are made of it: ResNet-18 under ``valgrind
#: --tool=none`` took over 90 s per call at 224x224 with oneDNN's AVX2 kernels and 1.0 s with its
#: AVX ones (no FMA); at 64x64, where torch convolves through MKL's gemm, 7.8 s per call with
#: MKL's AVX2 kernels and 1.0 s with its SSE4.2 ones (MKL maps AVX to SSE4.2 with a warning).
#: Counts then describe those kernels; torch's own kernels stay at AVX2.
KERNEL_CAPS: dict[str, str] = {"ONEDNN_MAX_CPU_ISA": "AVX", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
#: Functions kept per measurement for the "why" of a later verdict.
KEEP_FUNCTIONS = 40


@dataclass(frozen=True)
class InstructionCount:
    """One measurement's instruction counts (per call), from the last two counted windows."""

    #: Instructions per call in the last two counted windows, in order.
    windows: tuple[float, float]
    #: Self instructions per call by (short) function name, from the counted windows.
    functions: Mapping[str, float] = field(default_factory=dict)

    @property
    def per_call(self) -> float:
        """The figure every verdict compares: the later of the two windows (the earlier still
        warms caches of lazily initialised state more often)."""
        return self.windows[1]

    @property
    def disagreement(self) -> float:
        """Relative difference between the two windows (0.0 = identical)."""
        first, second = self.windows
        return abs(second - first) / first if first else 0.0

    def to_record(self) -> dict[str, Any]:
        """JSON form (results files and baseline sessions): ``per_call``, ``windows``,
        ``functions``."""
        return {
            "per_call": round(self.per_call, 1),
            "windows": [round(w, 1) for w in self.windows],
            "functions": {name: round(count, 1) for name, count in self.functions.items()},
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "InstructionCount":
        windows = record.get("windows") or [record["per_call"]] * 2
        return cls(
            (float(windows[0]), float(windows[1])),
            {str(k): float(v) for k, v in (record.get("functions") or {}).items()},
        )


def valgrind_command(argv: Sequence[str], dump_dir: Path, cache_sim: bool = False) -> list[str]:
    """``argv`` (e.g. ``[python, -m, pytest, ...]``) run under callgrind, instrumentation off."""
    if shutil.which("valgrind") is None:
        raise CallgrindError(
            "valgrind is not on PATH: instruction counts need it (Debian/Ubuntu: "
            "apt-get install valgrind; macOS is not supported by Valgrind)"
        )
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--collect-atstart=no",
        f"--cache-sim={'yes' if cache_sim else 'no'}",
        f"--callgrind-out-file={dump_dir}/callgrind.out.%p",
        *argv,
    ]


def kernel_caps(environ: Mapping[str, str], machine: str) -> dict[str, str]:
    """The kernel ISA caps a counted process on ``machine`` runs with: :data:`KERNEL_CAPS` on
    x86-64, each unless ``environ`` already sets it (the user's choice wins); none elsewhere."""
    if machine.lower() not in ("x86_64", "amd64"):
        return {}
    return {name: environ.get(name) or value for name, value in KERNEL_CAPS.items()}


def counted_process() -> Path | None:
    """The dump folder when this process runs under callgrind for us, else None."""
    value = os.environ.get(DUMP_DIR_ENV)
    return Path(value) if value else None


def valgrind_version() -> str:
    """``valgrind-3.19.0`` (part of an instruction-count environment), or ``valgrind-?``."""
    try:
        return _tool(["valgrind", "--version"], timeout=60.0).strip() or "valgrind-?"
    except CallgrindError:
        return "valgrind-?"


def calls_per_window(instructions_per_call: float) -> int:
    """Calls in each counted window: about :data:`WINDOW_INSTRUCTIONS` in all, 1 to 100.

    Only the per-call figure is compared, so the window size need not repeat between runs; more
    calls only average out what little varies between calls."""
    if instructions_per_call <= 0:
        return MAX_WINDOW_CALLS
    wanted = math.ceil(WINDOW_INSTRUCTIONS / instructions_per_call)
    return max(MIN_WINDOW_CALLS, min(MAX_WINDOW_CALLS, wanted))


def windows_agree(first: float, second: float) -> bool:
    """Two windows' instructions per call agree: within :data:`WINDOW_AGREEMENT`, or
    :data:`WINDOW_AGREEMENT_FLOOR` per call."""
    difference = abs(second - first)
    return difference <= WINDOW_AGREEMENT_FLOOR or difference <= WINDOW_AGREEMENT * first


def another_window(totals: Sequence[float]) -> bool:
    """Whether to count one more window after those counted so far (instructions per call,
    the settling ones first): until two are compared, then while the last two disagree, at most
    :data:`EXTRA_WINDOWS` more."""
    compared = len(totals) - SETTLING_WINDOWS
    if compared < 2:
        return True
    return compared < 2 + EXTRA_WINDOWS and not windows_agree(totals[-2], totals[-1])


def count_instructions(
    call: Callable[[], Any], dump_dir: Path, calls: int | None = None
) -> InstructionCount:
    """Instructions per call of ``call()`` in two counted windows of ``calls`` calls each,
    after :data:`SETTLING_WINDOWS` of as many, counted and dropped (``None``: sized by
    :func:`calls_per_window` from one counted probe call); where those two disagree, up to
    :data:`EXTRA_WINDOWS` more, the last two kept (:func:`another_window`).

    Must run in a process started by :func:`valgrind_command` (instrumentation off); leaves
    instrumentation off again when it returns. The warm-up budget is CPU time of this process,
    not wall time, so a busy machine does not shorten it.
    """
    import torch

    if calls is not None and calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    before = set(_dumps(dump_dir))
    start = time.process_time()
    done = 0
    while done < WARMUP_CALLS and (done == 0 or time.process_time() - start <= WARMUP_SECONDS):
        call()
        done += 1
    _instrumentation(True)
    # The cyclic garbage collector runs after a count of allocations, not per call: a window it
    # happened to run in counted 0.1-0.3 % more than the other (tiny MLP, 10 calls per window).
    # Disabled while counting, as timeit does while timing; collected before each window.
    collecting = gc.isenabled()
    try:
        # Once instrumented before the windows (callgrind's own first-execution costs), counted
        # on its own: its total sizes the windows; its profile is not kept.
        torch._C._valgrind_toggle()
        call()
        torch._C._valgrind_toggle_and_dump_stats()
        probe = [p for p in _dumps(dump_dir) if p not in before]
        if calls is None:
            probed = profile_total(probe[-1]) if probe else 0
            calls = calls_per_window(probed)
        for path in probe:
            path.unlink(missing_ok=True)
        windows: list[Path] = []
        totals: list[float] = []
        while another_window(totals):
            before = set(_dumps(dump_dir))
            gc.collect()
            gc.disable()
            torch._C._valgrind_toggle()
            for _ in range(calls):
                call()
            torch._C._valgrind_toggle_and_dump_stats()
            if collecting:
                gc.enable()
            new = [p for p in _dumps(dump_dir) if p not in before]
            if len(new) != 1:
                raise CallgrindError(
                    f"expected one callgrind profile per counted window in {dump_dir}, found "
                    f"{len(new)} new ones: is this process running under valgrind "
                    f"--tool=callgrind?"
                )
            windows.append(new[0])
            # Read while instrumented but not collecting: uncounted, and needed to tell whether
            # the last two windows agree.
            totals.append(profile_total(new[0]) / calls)
    finally:
        if collecting:
            gc.enable()
        _instrumentation(False)
    for dropped in windows[:-2]:
        dropped.unlink(missing_ok=True)
    first, second = windows[-2:]
    # The functions of the window every verdict compares.
    _, per_function = parse_annotate(_annotate(second))
    ranked = sorted(per_function.items(), key=lambda item: -item[1])[:KEEP_FUNCTIONS]
    first.unlink(missing_ok=True)
    second.unlink(missing_ok=True)
    return InstructionCount((totals[-2], totals[-1]), {name: n / calls for name, n in ranked})


def _annotate(path: Path) -> str:
    # A dump of torch code holds tens of thousands of functions: callgrind_annotate reads one
    # in seconds (about 10 s on a 2-core VM under load); minutes mean it is stuck.
    return _tool(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", "--auto=no", str(path)],
        timeout=ANNOTATE_TIMEOUT,
    )


def _instrumentation(on: bool) -> None:
    # No timeout here: subprocess waits for a timed-out child by polling (waitpid, sleep,
    # again), and callgrind counts those loops once it has switched instrumentation on, a
    # different number each time (+2.9 % on a 4.6 M-instruction test). Without one the wait
    # is a single blocking waitpid, which runs no instructions.
    _tool(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())], timeout=None)


#: Seconds callgrind_annotate may take to read one dump.
ANNOTATE_TIMEOUT = 300.0


def _tool(argv: list[str], timeout: float | None) -> str:
    """Run one of Valgrind's helper scripts; its failure (or a hang past ``timeout`` seconds,
    None: wait without polling) names the command and what it said."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CallgrindError(
            f"{' '.join(argv)} did not finish within {timeout or 0:.0f} s (it takes seconds "
            f"where the machine is not overloaded): count again on a less loaded machine"
        ) from None
    except FileNotFoundError:
        raise CallgrindError(
            f"{argv[0]} is not on PATH: it comes with Valgrind (Debian: apt-get install valgrind)"
        ) from None
    if result.returncode != 0:
        raise CallgrindError(
            f"{' '.join(argv)} failed ({result.returncode}): "
            f"{(result.stderr or result.stdout)[-500:]}; is this process running under "
            f"valgrind --tool=callgrind?"
        )
    return result.stdout


def _dumps(dump_dir: Path) -> list[Path]:
    found = [p for p in dump_dir.glob("callgrind.out.*") if re.search(r"\.\d+\.\d+$", p.name)]
    return sorted(found, key=lambda p: int(p.name.rsplit(".", 1)[1]))
