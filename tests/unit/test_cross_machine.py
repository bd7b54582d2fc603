"""Unit tests of the cross-machine comparison (pure functions, synthetic sessions)."""

from __future__ import annotations

from pytest_torchperf.judge.cross_machine import (
    normalised_check,
    pick_environment,
    same_torch_build,
)
from pytest_torchperf.store.sessions import Session

HERE = {"device": "cpu", "torch": "2.14.1", "torch_git": "abc", "threads": 1, "cpu_model": "A"}


def test_pick_environment_prefers_same_device_then_same_torch() -> None:
    others = [
        ("gpu", {"exact": {**HERE, "device": "cuda:0"}}),
        ("old-torch", {"exact": {**HERE, "torch": "2.13.0", "cpu_model": "B"}}),
        ("same-build", {"exact": {**HERE, "cpu_model": "B"}}),
    ]
    assert pick_environment(HERE, others)[0] == "same-build"
    assert pick_environment(HERE, []) is None
    assert same_torch_build(HERE, {**HERE, "cpu_model": "B"})
    assert not same_torch_build(HERE, {**HERE, "torch_git": "def"})


def test_normalised_check_factors_out_machine_speed() -> None:
    # The other machine: 1 ms per call with a 5 us kernel. Here the kernel takes 10 us (a machine
    # half as fast) and the call 2 ms: the same code, normalised -> +0 %, no warning.
    sessions = [Session.from_json({"statistic": 1e-3, "calibration": 5e-6})] * 3
    same, warn = normalised_check(2e-3, 10e-6, sessions, "other")
    assert "cross-machine: time +0% vs the baseline of other" in same and not warn
    assert "x0.50 as fast as other" in same and "a hint, not judged" in same
    slow, warn = normalised_check(4e-3, 10e-6, sessions, "other")
    assert "cross-machine warning: 100% slower than the baseline of other" in slow and warn
    faster, warn = normalised_check(0.5e-3, 10e-6, sessions, "other")
    assert "time -75%" in faster and not warn  # a faster machine-normalised time warns nothing
    # A pass a guard found disturbed: not even a hint (unchanged code read +85 % beside a
    # CPU-bound neighbour while the calibration kernel ran as fast as ever).
    busy, warn = normalised_check(4e-3, 10e-6, sessions, "other", disturbed="CPU share 0.55")
    assert not warn and busy == (
        "cross-machine: time +100% vs the baseline of other after normalising by the calibration "
        "kernel (this machine runs the calibration kernel x0.50 as fast as other), but this pass "
        "was disturbed (CPU share 0.55), so it is not even a hint: compare on a quiet machine"
    )
    untimed = [Session.from_json({"statistic": None, "times": [], "untimed": "busy"})]
    nothing, warn = normalised_check(4e-3, 10e-6, untimed, "other")
    assert "the baseline of other holds no timing (its saves stored none" in nothing and not warn
    none, warn = normalised_check(4e-3, None, sessions, "other")
    assert "cannot be normalised" in none and not warn


# Two environments that differ only in the CPU's instruction sets (AVX-512 VNNI vs AVX-512
# BF16/FP16 + AMX): the classes this project's CI runners switch between.
XEON = {**HERE, "cpu_isa": "avx2,avx512f,avx512_vnni", "cpu_capability": "AVX512"}
XEON_AMX = {**XEON, "cpu_isa": "avx2,avx512f,avx512_vnni,avx512_bf16,avx512_fp16,amx_bf16,amx_int8"}
FP32 = {
    "ops": {"aten::addmm": 3, "aten::relu": 2},
    "flops": 100,
    "params": 10,
    "dtypes": ["float32"],
}
INT8 = {
    "ops": {"aten::_to_copy": 15, "aten::_int_mm": 3},
    "flops": 100,
    "params": 10,
    "dtypes": ["float32", "int32", "int8"],
}


def test_counters_are_all_gated_within_a_cpu_class() -> None:
    from pytest_torchperf.judge.cross_machine import cpu_class_difference, gated_across

    same_class = {**XEON, "cpu_model": "Another Xeon", "cpu_count": 8}
    assert cpu_class_difference(XEON, same_class) is None
    assert gated_across(INT8, cpu_class_difference(XEON, same_class)) == ()


def test_across_cpu_classes_only_low_precision_code_has_counters_reported_not_gated() -> None:
    from pytest_torchperf.judge.cross_machine import cpu_class_difference, gated_across

    for here, stored in ((XEON, XEON_AMX), (XEON_AMX, XEON)):  # more and fewer ISA flags
        difference = cpu_class_difference(here, stored)
        assert difference is not None and difference.startswith(f"cpu_isa {here['cpu_isa']} here")
        assert gated_across(FP32, difference) == ()  # fp32: every counter stays exact
        assert gated_across(INT8, difference) == ("ops", "flops", "memory")  # params, graphs gated
    other_capability = {**XEON, "cpu_capability": "AVX2"}
    assert "cpu_capability AVX512 here vs AVX2 stored" in cpu_class_difference(
        XEON, other_capability
    )


def test_low_precision_is_read_from_dtypes_and_from_quantized_ops() -> None:
    from pytest_torchperf.judge.counter_diff import low_precision

    assert not low_precision(FP32)
    assert low_precision(INT8)
    assert low_precision({"ops": {"aten::mm": 1}, "dtypes": ["bfloat16", "float32"]})
    # Older baselines carry no dtypes: quantized ops still tell.
    assert low_precision({"ops": {"quantized_decomposed::quantize_per_tensor": 2}})
    assert not low_precision({"ops": {"aten::mm": 1}})
