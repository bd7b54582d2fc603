"""Shared fixtures of the end-to-end tests: a pytester with fast sampling and the guards off.

Every pytester run gets a pytest.ini with very short sampling (these tests check workflows, not
speed), and verdicts are made deterministic by editing stored baselines to extreme values rather
than by making anything slower (no sleeping, no timing races).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

# Import torch (and the parts the plugin loads lazily) in the outer process before any pytester
# run: in-process pytester restores sys.modules after each run, and re-importing torch in the same
# process crashes it. With torch already in the snapshot, inner runs reuse the loaded module.
import torch

import pytest_torchperf
from pytest_torchperf.measure.timing import benchmark_timer

benchmark_timer()  # torch.utils.benchmark, without the CUDA_HOME line its import logs


def _load_lazy_torch_modules() -> None:
    """Run each torch feature the plugin uses once, so its lazy imports land in the snapshot."""
    from pytest_torchperf.measure.counters import collect_counters, graph_counters
    from pytest_torchperf.measure.profiling import profile_call, quiet_kineto

    quiet_kineto()
    model = torch.nn.Linear(2, 2)
    x = torch.randn(1, 2)
    collect_counters(lambda: model(x), "cpu", module=model)
    profile_call(lambda: model(x), "cpu", iterations=1)
    compiled = torch.compile(model, backend="eager")
    graph_counters(model, (x,), {})
    compiled(x)
    torch._dynamo.reset()
    # The variants' machinery: inductor, torchao (dynamic and PT2E), fx fusion, autocast.
    import importlib

    from pytest_torchperf.variants.compilers import inductor_problem
    from pytest_torchperf.variants.quantization import QuantizationUnavailable, quantize_model

    importlib.import_module("torch.fx.experimental.optimization")
    inductor_problem("cpu")
    conv = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.Flatten(), torch.nn.Linear(8, 2))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            quantize_model(conv, torch.randn(1, 1, 2, 2), mode="static")
            quantize_model(torch.nn.Sequential(torch.nn.Linear(2, 2)), x, mode="dynamic")
        except QuantizationUnavailable:
            pass  # no torchao here: the int8 tests skip with the reason
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(x)
    torch._dynamo.reset()


_load_lazy_torch_modules()

FAST_INI = """
[pytest]
torchperf_min_time = 0.02s
torchperf_warmup = 0.005s
# The machine running this suite is shared: the contention, spread, neighbour and machine-speed
# guards are switched off here (tests of the guards switch them back on), so verdicts depend only
# on edited baselines.
torchperf_min_cpu_share = 0
torchperf_max_spread = 1000%
torchperf_max_neighbour_load = 100%
torchperf_max_machine_slowdown = 1000%
# Several saves of 20 ms on a shared machine disagree: the bound on a limit widened by that noise
# is off too (tests of the bound switch it back on).
torchperf_max_widening = off
# Suspected slowdowns are confirmed in this process: a fresh pytest process per failing test would
# add seconds each (tests/e2e/test_processes.py checks the default, fresh, on its own).
torchperf_confirm = same
# Saves measure in one process (the default, 5 fresh processes, is tested in test_processes.py).
torchperf_processes = 1
# A refused save pass is re-measured once, without waiting for the machine to quiet down (tests of
# the waiting set it).
torchperf_save_wait = 0
# Instruction runs count in one process under Valgrind (the default, one per core, would start
# two here; test_instructions.py tests processes side by side with one real Valgrind process).
torchperf_instruction_jobs = 1
console_output_style = classic
# The short min_time above is meant (tests/e2e/test_options.py checks its warning).
filterwarnings =
    ignore:.*No CUDA runtime.*
    ignore:min_time
# Hypothesis's pytest plugin (on the CI machine, unused here) costs every pytest process 0.8 s to
# import, and a Valgrind child 3.6 s.
addopts = -p no:hypothesispytest
"""


@pytest.fixture
def perf(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester with fast torchperf sampling configured and a wide terminal.

    The wide terminal keeps the summary in its flat one-row-per-measurement layout, which the
    assertions below match; the grouped layout for narrow terminals is unit-tested.
    """
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makefile(".ini", pytest=FAST_INI)
    return pytester


# -- deprecations of the plugin's own code are errors ---------------------------------------------
#
# pyproject.toml's filterwarnings makes a DeprecationWarning raised from pytest_torchperf code an
# error, but only in this suite's own tests: a pytest run an e2e test starts reads the ini file
# it writes, and wraps each phase in its own warning filters (DeprecationWarning "always", then
# that ini's filters), so the plugin's warnings there only reached the inner run's summary.
# Each in-process run gets the same filter added to its ini. The processes a test starts
# (runpytest_subprocess, an A/B run's controller) and those the plugin starts (fresh processes,
# counting jobs, A/B sides) get it through PYTHONWARNINGS, which they inherit: some of the
# plugin's code runs only there (a child's lines, counting under Valgrind, a side's turns), and
# a warning there reached only the child's log. Its module field names one module exactly (no
# pattern, unlike the ini's), so it lists every module of the package.
# A deprecated function an e2e test passes as the target itself warns "from" the plugin line that
# calls it (stacklevel 2) and fails too: time such a function inside a lambda or module instead.

OUR_DEPRECATIONS = "error::DeprecationWarning:pytest_torchperf"
_PACKAGE = Path(pytest_torchperf.__file__).parent
CHILD_DEPRECATIONS = ",".join(
    f"error::DeprecationWarning:{'.'.join(('pytest_torchperf', *path.parts)).removesuffix('.__init__')}"
    for path in sorted(p.relative_to(_PACKAGE).with_suffix("") for p in _PACKAGE.rglob("*.py"))
)


class _DeprecationGuard:
    """Registered in each in-process pytest run: our deprecations are errors there too."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("filterwarnings", OUR_DEPRECATIONS)


@pytest.fixture(autouse=True)
def _our_deprecations_are_errors(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process runs of a test using pytester carry :class:`_DeprecationGuard` (a plugin
    object, so not through ``pytester.plugins``: subprocess runs refuse those); the processes
    any test starts, :data:`CHILD_DEPRECATIONS`."""
    before = os.environ.get("PYTHONWARNINGS")
    monkeypatch.setenv(
        "PYTHONWARNINGS", f"{before},{CHILD_DEPRECATIONS}" if before else CHILD_DEPRECATIONS
    )
    if "pytester" not in request.fixturenames:
        return
    pytester: pytest.Pytester = request.getfixturevalue("pytester")
    inline_run = pytester.inline_run

    def guarded(*args: Any, plugins: Sequence[Any] = (), **kwargs: Any) -> pytest.HookRecorder:
        return inline_run(*args, plugins=[*plugins, _DeprecationGuard()], **kwargs)

    monkeypatch.setattr(pytester, "inline_run", guarded)


# -- the accelerator fallback ---------------------------------------------------------------------
#
# A measurement's device comes from its target: parameters, tensor inputs, the modules or tensors
# a closure captured (pytest_torchperf/measure/devices.py:infer_device). Only where there are none
# (a whole test body, a closure over nothing) does it fall back to "auto": the accelerator if one
# is present. On this project's CPU-only CI that is cpu, so a test whose expectations are CPU's
# (CPU share guards, calibration kernel, clock "cpu", bf16 autocast, a "cpu-..." environment)
# passes there and fails on a GPU machine: 5 of the 19 failures of
# benchmarks/results/gpu-suite-h200-torch211.log. Whether a target reaches the fallback does not
# depend on the machine, so it is checked here, on every machine: a test whose in-process runs
# make such a measurement fails unless it is marked ``any_device`` (its expectations hold on a GPU
# too). A test that means CPU says so instead: a CPU tensor input, or one its target captures.
# Not seen: measurements in child processes (runpytest_subprocess, fresh and counting processes).

FALLBACKS = pytest.StashKey[list[str]]()


@pytest.fixture(autouse=True)
def _accelerator_fallbacks(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[str]]:
    """Records the inner test of each in-process measurement whose device came from the
    accelerator fallback (``devices.default_device``)."""
    from pytest_torchperf.measure import devices

    used: list[str] = []
    request.node.stash[FALLBACKS] = used
    original = devices.default_device

    def recording() -> str:
        used.append(os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0])
        return original()

    monkeypatch.setattr(devices, "default_device", recording)
    yield used


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    result = yield
    used = item.stash.get(FALLBACKS, [])
    if used and item.get_closest_marker("any_device") is None:
        pytest.fail(
            f"{len(used)} measurement(s) of this test took their device from the accelerator "
            f"fallback ({', '.join(sorted(set(used)))}): cpu here, cuda on a GPU machine, where "
            "CPU expectations (CPU share guard, calibration kernel, clock 'cpu', bf16 autocast, "
            "a cpu-... environment) no longer hold. Give the target a CPU tensor input (or let "
            "it capture one), or mark the test @pytest.mark.any_device if its expectations hold "
            "on a GPU too",
            pytrace=False,
        )
    return result
