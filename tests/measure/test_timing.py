"""Device inference of the timer (torch, no pytester)."""

from __future__ import annotations


def test_device_is_taken_from_parameters_before_inputs() -> None:
    import torch

    from pytest_torchperf.measure.devices import infer_device

    model = torch.nn.Linear(2, 2)
    assert infer_device(model, (torch.empty(1, 2, device="meta"),)) == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert infer_device(lambda: None, ()).startswith(expected)  # closures: the real accelerator


def test_a_closure_takes_the_device_of_what_it_captured(monkeypatch) -> None:
    """On a GPU machine a closure over CPU tensors is a CPU measurement (CPU clock and guards);
    only an opaque closure falls back to the accelerator (faked here: no GPU needed)."""
    import functools

    import torch

    from pytest_torchperf.measure import devices

    monkeypatch.setattr(devices, "default_device", lambda: "cuda:0")
    x = torch.zeros(2, 2)
    model = torch.nn.Linear(2, 2)
    assert devices.infer_device(lambda: x @ x, ()) == "cpu"
    assert devices.infer_device(lambda: model(torch.ones(2)), ()) == "cpu"
    assert devices.infer_device(functools.partial(torch.mm, x), ()) == "cpu"
    assert devices.infer_device(model.forward, ()) == "cpu"  # a bound method: its module
    assert devices.infer_device(lambda: torch.ones(2).sum(), ()) == "cuda:0"
    meta = torch.empty(2, device="meta")
    assert devices.infer_device(lambda: meta, ()) == "meta"  # not measurable: skipped, saying so


GLOBAL_X = None
GLOBAL_MODEL = None


def test_a_function_takes_the_device_of_the_globals_it_names(monkeypatch) -> None:
    """``x = torch.randn(...)`` at a test module's top, then ``lambda: x @ x``: x is a global,
    not a closure cell, and on a GPU machine the measurement went to the accelerator."""
    import torch

    from pytest_torchperf.measure import devices

    monkeypatch.setattr(devices, "default_device", lambda: "cuda:0")
    monkeypatch.setitem(globals(), "GLOBAL_X", torch.zeros(2, 2))
    assert devices.infer_device(lambda: GLOBAL_X @ GLOBAL_X, ()) == "cpu"
    monkeypatch.setitem(globals(), "GLOBAL_X", torch.zeros(2, 2, device="meta"))
    monkeypatch.setitem(globals(), "GLOBAL_MODEL", torch.nn.Linear(2, 2))
    assert devices.infer_device(lambda: GLOBAL_MODEL(GLOBAL_X), ()) == "cpu"  # in code order
    assert devices.infer_device(lambda: torch.ones(2), ()) == "cuda:0"  # torch is no tensor


def test_timing_prints_no_cuda_home_line() -> None:
    """Importing torch.utils.benchmark imports torch.utils.cpp_extension, which logs "No CUDA
    runtime is found, using CUDA_HOME=..." where CUDA_HOME is set and no GPU is visible (a CUDA
    build of torch on a CPU-only CI machine): a line in the captured output of every failing perf
    test. Timing drops it, and a later import of cpp_extension (inductor's) finds the module
    imported and prints nothing either. The environment makes torch log it on any machine; the
    control run proves it does."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "CUDA_HOME": "/nonexistent-cuda", "CUDA_VISIBLE_DEVICES": ""}

    def stderr_of(code: str) -> str:
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
        )
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stderr

    assert "No CUDA runtime" in stderr_of("import torch.utils.benchmark")  # the control
    timed = stderr_of(
        "import torch\n"
        "from pytest_torchperf import BlockTimer\n"
        "BlockTimer(min_time=0.01, warmup=0.001).measure(torch.nn.Linear(4, 4), torch.ones(2, 4))\n"
        "import torch.utils.cpp_extension, torch.utils.benchmark\n"
    )
    assert "No CUDA runtime" not in timed, timed
