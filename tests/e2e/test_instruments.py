"""Instruments: noise-free counter gates, self-explaining slowdowns, and the device, timer,
profiler and NVTX fixtures, all on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import baseline_files, edit_baselines

MODEL = """
import torch

class Net(torch.nn.Module):
    def __init__(self, width={width}):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, width)
        self.fc2 = torch.nn.Linear(width, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x)){extra}
        return self.fc2(h)

def test_net(torchperf):
    torch.manual_seed(0)
    torchperf(Net(), torch.randn(8, 16), name="net"{options})
"""


def write_model(
    pytester: pytest.Pytester, width: int = 32, extra: str = "", options: str = ""
) -> None:
    pytester.makepyfile(test_net=MODEL.format(width=width, extra=extra, options=options))


# A huge timing tolerance: these verdicts must come from the counters alone.
LOOSE = ["--torchperf-compare", "--torchperf-max-slowdown=900%"]


def test_counters_are_stored_with_the_baseline(perf: pytest.Pytester) -> None:
    write_model(perf)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    (path,) = baseline_files(perf.path / ".torchperf")
    session = json.loads(path.read_text())["tests"]["test_net.py::test_net"]["net"]["sessions"][0]
    counters = session["counters"]
    # 2 * (8*16*32 + 8*32*4) multiply-adds = 10240 FLOPs; 16*32+32 + 32*4+4 parameters.
    assert counters["flops"] == 2 * (8 * 16 * 32 + 8 * 32 * 4)
    assert counters["params"] == 16 * 32 + 32 + 32 * 4 + 4
    assert counters["param_bytes"] == 4 * counters["params"]
    assert counters["ops"]["aten::relu"] == 1 and counters["ops"]["aten::addmm"] == 2
    assert counters["peak_memory"] >= 8 * 32 * 4  # at least the hidden activation
    assert session["top_ops"] and {"op", "calls", "self_cpu", "self_device"} <= set(
        session["top_ops"][0]
    )


def test_one_extra_cheap_op_fails_the_counter_gate(perf: pytest.Pytester) -> None:
    write_model(perf)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    write_model(perf, extra="\n        h = h * 1.0")  # one extra elementwise op: timing noise-level
    result = perf.runpytest(*LOOSE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "net: counters changed vs baseline: ops changed: new aten::mul x1. If "
            "intended, record a new baseline (pytest *::test_* --torchperf-save --torchperf-reset); "
            "to stop gating "
            'it pass ignore_counters=[[]"ops"[]]',
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*test_net*net*FAIL*",
            "test_net.py::test_net: net: counters changed: ops changed: new aten::mul x1",
        ]
    )


def test_flops_and_parameter_changes_are_worded_precisely(perf: pytest.Pytester) -> None:
    write_model(perf, width=32)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    write_model(perf, width=48)
    result = perf.runpytest(*LOOSE)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*FLOPs +50.0% (10,240 -> 15,360); parameters 676 -> 1,012 (2.6 KiB -> 4.0 KiB); peak memory*"
        ]
    )


def test_a_counter_can_be_opted_out(perf: pytest.Pytester) -> None:
    write_model(perf)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    write_model(perf, extra="\n        h = h * 1.0", options=', ignore_counters=["ops", "memory"]')
    perf.runpytest(*LOOSE).assert_outcomes(passed=1)
    write_model(perf, extra="\n        h = h * 1.0")
    perf.runpytest(*LOOSE, "--torchperf-ignore-counters=ops,memory").assert_outcomes(passed=1)
    write_model(perf, extra="\n        h = h * 1.0", options=", counters=False")
    perf.runpytest(*LOOSE).assert_outcomes(passed=1)


def test_confirmed_slowdown_names_the_ops_responsible(perf: pytest.Pytester) -> None:
    write_model(perf, width=2048)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)

    def faster_past(_nodeid: str, _name: str, session: dict) -> None:
        # The stored run was 100x faster overall and in aten::addmm: a deterministic "slowdown".
        # Every other row, the Python between ops included, is stored 100x slower, so that no
        # process-to-process noise can make it look grown: a fresh-clone CI run saw the time
        # outside ops grow 80% on a machine 21% slower, and the why line led with it.
        session["statistic"] *= 0.01
        session["times"] = [t * 0.01 for t in session["times"]]
        for row in session["top_ops"]:
            row["self_cpu"] *= 0.01 if row["op"] == "aten::addmm" else 100

    edit_baselines(perf.path / ".torchperf", faster_past)
    result = perf.runpytest("--torchperf-compare")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "net: *% slower than baseline*",
            "  how sure: *",
            "  why (profiled, self time per call vs baseline): aten::addmm self time +*% (+*), the same "
            "calls: this op got slower*",
            "  trace: *.torchperf-report/traces/test_net.py_test_net-net-regression.json",
        ]
    )
    traces = list((perf.path / ".torchperf-report" / "traces").glob("*regression.json"))
    assert len(traces) == 1 and json.loads(traces[0].read_text())["traceEvents"]


def test_profiler_fixture_saves_trace_and_reports_top_ops(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_prof(torchperf_profiler):
            model = torch.nn.Linear(8, 8)
            with torchperf_profiler() as prof:
                model(torch.randn(4, 8))
            keys = {e.key for e in prof.key_averages()}
            assert "aten::addmm" in keys or "aten::linear" in keys
            assert prof.trace.exists()
    """)
    result = perf.runpytest("-rP")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*- Captured torchperf profiler call -*",
            "trace: *.torchperf-report/traces/test_profiler_fixture_saves_trace_and_reports_top_ops.py_"
            "test_prof.json",
            "op * calls * self CPU * self device",
            "aten::*",
        ]
    )
    assert "gpuGetDeviceCount" not in result.stdout.str() + result.stderr.str()


def test_profiler_fixture_works_bare_with_its_defaults(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_bare(torchperf_profiler):
            model = torch.nn.Linear(8, 8)
            with torchperf_profiler as prof:
                model(torch.randn(4, 8))
            with torchperf_profiler as again:  # twice in one test: a second trace
                model(torch.randn(4, 8))
            assert {r["op"] for r in prof.top_ops()} & {"aten::addmm", "aten::linear"}
            assert prof.trace.exists() and again.trace.exists() and prof.trace != again.trace
    """)
    result = perf.runpytest("-rP")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*- Captured torchperf profiler call -*",
            "trace: *test_bare.json",
            "op * calls * self CPU * self device",
        ]
    )


def test_timing_inside_the_profiler_is_refused(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_both(torchperf, torchperf_profiler):
            model = torch.nn.Linear(8, 8)
            with torchperf_profiler():
                torchperf(model, torch.randn(4, 8), name="lin")
    """)
    result = perf.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*'lin' was timed inside a torchperf_profiler block; the profiler adds 3-25% overhead, so "
            "time outside the block and profile in a separate pass"
        ]
    )


def test_nvtx_ranges_work_on_cpu_and_show_in_the_profiler(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch

        def test_nvtx(torchperf_nvtx, torchperf_profiler):
            @torchperf_nvtx("decorated-step")
            def step(x):
                return x * 2

            with torchperf_profiler() as prof:
                with torchperf_nvtx("forward"):
                    step(torch.ones(3))
            keys = {e.key for e in prof.key_averages()}
            assert {"forward", "decorated-step"} <= keys, keys
    """)
    perf.runpytest().assert_outcomes(passed=1)


def test_device_fixture_auto_and_absent_device(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_dev(torchperf_device):
            assert isinstance(torchperf_device, torch.device)
            with open("device.txt", "w") as fh:
                fh.write(str(torchperf_device))
    """)
    perf.runpytest().assert_outcomes(passed=1)
    import torch

    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert (perf.path / "device.txt").read_text() == expected
    if not torch.cuda.is_available():
        result = perf.runpytest("--torchperf-device=cuda", "-rs")
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*device 'cuda' requested but CUDA is not available*"])
    if not torch.backends.mps.is_available():
        ini = perf.path / "pytest.ini"
        ini.write_text(ini.read_text() + "\ntorchperf_device = mps\n")
        result = perf.runpytest("-rs")
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*device 'mps' requested but MPS is not available*"])
    # A type torch does not know here (a backend's package not imported, or a misspelling no
    # known type is close to) skips, saying why and which devices to use.
    result = perf.runpytest("--torchperf-device=mlu:0", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*device 'mlu:0' requested but torch does not know the device type 'mlu': a "
            "backend's type exists once its package is imported (torch_npu for npu, in "
            "conftest.py for one), else the name is misspelt; use auto (an accelerator if "
            "present, else cpu), cpu, cuda, *, or the type a backend's package registers when "
            "imported (hpu, npu, ...)"
        ]
    )


def test_timer_fixture_is_recorded_but_not_gated_unless_asked(perf: pytest.Pytester) -> None:
    perf.makepyfile("""
        import torch
        def test_timer(torchperf_timer):
            x = torch.randn(32, 32)
            r = torchperf_timer(lambda: x @ x, name="matmul")
            assert r.median > 0 and r.source == "timer" and r.verdict is None

        def test_gated(torchperf_timer):
            x = torch.randn(32, 32)
            torchperf_timer(lambda: x @ x, name="gated-matmul", gate=True)
    """)
    result = perf.runpytest("--torchperf-save")
    result.assert_outcomes(passed=2)
    # The gated block is stored and counted; the ungated one neither.
    result.stdout.fnmatch_lines(
        ["*test_timer*matmul*measured*", "torchperf: stored 1 measurement: timing for 1 of 1, *"]
    )
    (path,) = baseline_files(perf.path / ".torchperf")
    stored = json.loads(path.read_text())["tests"]
    assert list(stored) == [
        "test_timer_fixture_is_recorded_but_not_gated_unless_asked.py::test_gated"
    ]
    compare = perf.runpytest("--torchperf-compare", "--torchperf-max-slowdown=900%")
    compare.stdout.fnmatch_lines(["*gated-matmul*pass*"])
    compare.stdout.fnmatch_lines(["*test_timer*matmul*measured*"])
    compare.stdout.fnmatch_lines(["torchperf: compared 1 measurement: timing judged for 1 of 1, *"])


def test_block_timer_works_without_pytest() -> None:
    import torch

    from pytest_torchperf.run.block_timer import BlockTimer

    x = torch.randn(16, 16)
    result = BlockTimer(min_time=0.02, warmup=0.005).measure(lambda: x @ x, name="mm")
    assert result.name == "mm" and result.samples and result.clock == "cpu"
    assert result.min <= result.p25 <= result.median


COMPILED = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x){extra}
        return torch.relu(y)

def test_compiled(torchperf):
    torch._dynamo.reset()
    # backend="eager" runs dynamo's capture without inductor codegen: cheap enough for a test.
    model = torch.compile(Net(), backend="eager")
    torchperf(model, torch.randn(4, 8), name="compiled")
"""


def test_graph_breaks_of_compiled_targets_are_gated(perf: pytest.Pytester) -> None:
    perf.makepyfile(test_c=COMPILED.format(extra=""))
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    (path,) = baseline_files(perf.path / ".torchperf")
    counters = json.loads(path.read_text())["tests"]["test_c.py::test_compiled"]["compiled"][
        "sessions"
    ][0]["counters"]
    assert (counters["graphs"], counters["graph_breaks"], counters["recompiles"]) == (1, 0, 0)
    assert counters["ops"]["aten::addmm"] == 1  # counted on the eager original
    perf.runpytest(*LOOSE).assert_outcomes(passed=1)
    # A data-dependent branch forces a graph break.
    perf.makepyfile(
        test_c=COMPILED.format(extra="\n        if y.sum().item() > 1e9:\n            y = y * 2")
    )
    result = perf.runpytest(*LOOSE, "--torchperf-ignore-counters=ops,memory,flops")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "compiled: counters changed vs baseline: graphs 1 -> 2; graph breaks 0 -> 1 (first reason: "
            "*item()*)*"
        ]
    )


def test_python_overhead_is_named_as_outside_torch_ops() -> None:
    import torch

    from pytest_torchperf.measure.op_tables import OUTSIDE_OPS, diff_top_ops
    from pytest_torchperf.measure.profiling import profile_call

    model = torch.nn.Linear(16, 16)
    x = torch.randn(1, 16)

    def slow():
        total = 0
        # Pure Python, ~2 ms per call: invisible to op counters, visible here as time outside
        # the ops (~40 ms over the 20 profiled calls against ~0.2 ms of op time, so another
        # process preempting one op for a time slice cannot outrank it).
        for i in range(50000):
            total += i
        return model(x)

    with torch.no_grad():
        before, _ = profile_call(lambda: model(x), "cpu", 20)
        after, _ = profile_call(slow, "cpu", 20)
    assert any(row["op"] == OUTSIDE_OPS for row in before)
    assert diff_top_ops(before, after)[0].startswith(f"{OUTSIDE_OPS} self time +")


def test_a_failing_profiler_block_still_writes_the_trace_it_names(perf: pytest.Pytester) -> None:
    """A block that raised named `trace: <path>` in the failure's report, a file never written
    (newcomer pass): the trace of what ran up to the error is written."""
    perf.makepyfile("""
        import torch
        def test_prof_raises(torchperf_profiler):
            with torchperf_profiler as prof:
                torch.randn(3, 4) @ torch.randn(5, 6)
    """)
    result = perf.runpytest()
    result.assert_outcomes(failed=1)
    line = next(line for line in result.outlines if line.startswith("trace: "))
    assert Path(line.removeprefix("trace: ")).is_file(), line
