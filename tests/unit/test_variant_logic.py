"""Unit tests of the variant building blocks that need neither torch nor a compiler: option
parsing, tolerances, the accuracy gate, interleaved sampling on a fake clock, and the summary's
variant columns. The accuracy metrics and fingerprints themselves (torch) are in
tests/measure/test_accuracy.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from pytest_torchperf.judge.numerics import check_limits
from pytest_torchperf.measure.sampling import collect_interleaved, round_ratios
from pytest_torchperf.options.measure_options import OptionError, parse_layer, resolve
from pytest_torchperf.options.values import SEED_OFF, parse_seed
from pytest_torchperf.options.variant_options import (
    parse_accuracy,
    parse_data,
    parse_min_speedup,
    parse_variant_filter,
    parse_variants,
)
from pytest_torchperf.report.terminal import render_table, variant_lines
from pytest_torchperf.store.record import Record
from pytest_torchperf.variants.registry import tolerances


def _read(records: Iterable[Mapping[str, object]]) -> list[Record]:
    """The records as the reports get them: read once from their JSON form."""
    return [Record.from_json(r) for r in records]


# -- options ----------------------------------------------------------------------------------
def test_variants_accept_list_string_and_dict_and_keep_order() -> None:
    assert parse_variants(["eager", "int8"]) == (("eager", ()), ("int8", ()))
    assert parse_variants("compiled, amp") == (("compiled", ()), ("amp", ()))
    specs = parse_variants({"compiled": {"mode": "max-autotune"}, "amp": None})
    assert specs == (("compiled", (("mode", "max-autotune"),)), ("amp", ()))
    options = resolve(parse_layer({"variants": {"compiled": {"backend": "aot_eager"}}}, "t"))
    assert options.variant_names() == ("compiled",)
    assert options.variant_settings("compiled") == {"backend": "aot_eager"}
    assert options.variant_settings("amp") == {}


@pytest.mark.parametrize(
    "value, message",
    [
        (
            ["eagr"],
            "unknown variant 'eagr' (did you mean 'eager'?); known variants: eager, compiled, "
            "fused, amp, int8",
        ),
        (["amp", "amp"], "variant 'amp' is listed twice"),
        (
            {"compiled": {"moed": "x"}},
            "variant 'compiled' has no setting 'moed'; its settings: backend",
        ),
        ({"eager": {"mode": "x"}}, "variant 'eager' has no setting 'mode'; its settings: none"),
        ({"amp": "bf16"}, "settings of variant 'amp' must be a dict"),
        ([], "names no variant"),
        (3, "is not a list of variants"),
    ],
)
def test_bad_variants_name_the_problem(value: object, message: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_variants(value)
    assert message in str(info.value)


def test_variant_filter_and_per_variant_options() -> None:
    assert parse_variant_filter("eager,compiled,eager") == ("eager", "compiled")
    with pytest.raises(OptionError, match="unknown variant 'int4'"):
        parse_variant_filter("int4")
    assert parse_min_speedup({"compiled": "1.5x", "int8": 2}) == (("compiled", 1.5), ("int8", 2.0))
    with pytest.raises(OptionError, match="unknown variant 'eager'"):
        parse_min_speedup({"eager": 1.2})  # eager is the reference: its speedup is 1 by definition
    with pytest.raises(OptionError, match="must be a positive number"):
        parse_min_speedup({"amp": 0})
    assert parse_accuracy({"int8": {"rel_l2": 0.1, "top1": 0.9}}) == (
        ("int8", (("rel_l2", 0.1), ("top1", 0.9))),
    )
    with pytest.raises(OptionError, match="unknown metric 'rel_l1' \\(did you mean 'rel_l2'\\?\\)"):
        parse_accuracy({"int8": {"rel_l1": 0.1}})
    with pytest.raises(OptionError, match="must be >= 0"):
        parse_accuracy({"amp": {"cosine": -1}})
    with pytest.raises(OptionError, match="pair \\(inputs, targets\\)"):
        parse_data(object())  # anything but a pair (a tensor, say)
    assert parse_seed("off") == SEED_OFF and parse_seed("7") == 7
    with pytest.raises(OptionError, match="not a seed"):
        parse_seed(-3)


def test_tolerance_defaults_and_overrides() -> None:
    assert tolerances("int8")["rel_l2"] == 6e-2
    assert tolerances("amp")["rel_l2"] == 3e-2
    assert tolerances("amp", amp_dtype="float16")["rel_l2"] == 5e-3
    assert tolerances("int8", {"rel_l2": 0.1})["rel_l2"] == 0.1
    assert tolerances("int8", {"rel_l2": 0.1})["cosine"] == 0.998


def test_compiled_tolerance_is_wider_on_cuda_and_still_overridable() -> None:
    assert tolerances("compiled", device="cpu")["rel_l2"] == 1e-5
    assert tolerances("fused", device="cuda:0")["rel_l2"] == 1e-4
    assert tolerances("amp", device="cuda:0")["rel_l2"] == 3e-2  # only compiled/fused change
    assert tolerances("compiled", {"rel_l2": 2e-5}, device="cuda")["rel_l2"] == 2e-5


# -- accuracy ---------------------------------------------------------------------------------


def test_check_limits_names_metric_value_and_limit() -> None:
    metrics = {"rel_l2": 0.08, "cosine": 0.997, "max_abs": 0.1, "top1": 1.0, "int_mismatch": 0}
    [message] = check_limits("resnet18[int8]", metrics, tolerances("int8"))
    assert message.startswith("resnet18[int8]: outputs drifted from eager fp32: ")
    assert "rel_l2 0.0800 above the limit 0.0600" in message
    assert "cosine 0.9970 below the minimum 0.9980" in message
    assert "accuracy={'int8': {...}}" in message
    assert (
        check_limits("m[int8]", {**metrics, "rel_l2": 0.01, "cosine": 0.9999}, tolerances("int8"))
        == []
    )
    [nan] = check_limits("m[amp]", {"rel_l2": float("nan")}, tolerances("amp"))
    assert "rel_l2 nan above the limit" in nan


# -- interleaved sampling ---------------------------------------------------------------------
class FakeVariants:
    """A fake clock and block runners: variant ``k`` costs ``per_call[k]`` seconds per call."""

    def __init__(self, per_call: dict[str, float]) -> None:
        self.per_call = per_call
        self.now = 0.0
        self.order: list[tuple[str, int]] = []

    def clock(self) -> float:
        return self.now

    def runner(self, name: str):
        def run(number: int) -> float:
            self.order.append((name, number))
            self.now += number * self.per_call[name]
            return number * self.per_call[name]

        return run


def test_interleaved_sampling_runs_round_robin_with_equal_rounds() -> None:
    fake = FakeVariants({"eager": 1e-3, "compiled": 5e-4})
    raws = collect_interleaved(
        {n: fake.runner(n) for n in fake.per_call},
        min_time=0.1,
        warmup=0.01,
        clock=fake.clock,
        cpu_clock=fake.clock,
    )
    timed = [(n, k) for n, k in fake.order if k > 1]
    assert [n for n, _ in timed[:4]] == ["eager", "compiled", "eager", "compiled"]
    assert len(raws["eager"].times) == len(raws["compiled"].times)
    assert raws["eager"].number_per_block == 10 and raws["compiled"].number_per_block == 20
    assert raws["eager"].wall_time + raws["compiled"].wall_time >= 0.2
    assert raws["eager"].wall_time + raws["compiled"].wall_time < 0.2 + 0.011 + 0.011
    assert raws["eager"].cpu_share == pytest.approx(1.0)
    ratios = round_ratios(raws["eager"].times, raws["compiled"].times)
    assert ratios and all(r == pytest.approx(2.0) for r in ratios)


def test_a_slow_variant_does_not_multiply_the_budget() -> None:
    """One call of the slow variant is a whole block: the budget is shared, at least 5 rounds."""
    fake = FakeVariants({"eager": 1e-3, "amp": 0.3})
    raws = collect_interleaved(
        {n: fake.runner(n) for n in fake.per_call},
        min_time=0.5,
        warmup=0.0,
        clock=fake.clock,
        cpu_clock=fake.clock,
    )
    assert len(raws["amp"].times) == 5  # min_blocks rounds, 1.5 s of amp already cover 2 x 0.5 s
    assert raws["amp"].number_per_block == 1


def test_interleaved_blocks_are_sized_from_each_variants_fastest_warm_up_call() -> None:
    """A warm-up beside a busy process (two calls of three 3x slower) sizes 10 ms of each
    variant's own work, as :func:`collect` does, not the median's third of it."""
    fake = FakeVariants({"eager": 1e-3, "compiled": 5e-4})
    slowed = iter([1, 3, 3] * 1000)

    def runner(name: str):
        def run(number: int) -> float:
            factor = next(slowed) if number == 1 else 1
            fake.now += number * fake.per_call[name] * factor
            return number * fake.per_call[name] * factor

        return run

    raws = collect_interleaved(
        {n: runner(n) for n in fake.per_call},
        min_time=0.05,
        warmup=0.01,
        clock=fake.clock,
        cpu_clock=fake.clock,
    )
    assert raws["eager"].number_per_block == 10 and raws["compiled"].number_per_block == 20


def test_round_ratios_pair_rounds_and_skip_zero() -> None:
    assert round_ratios([2.0, 4.0, 1.0], [1.0, 2.0, 0.0]) == [2.0, 2.0]


# -- summary ----------------------------------------------------------------------------------
def _record(name: str, variant: str = "eager", **extra: object) -> dict:
    return {
        "nodeid": "t.py::test_m",
        "name": name,
        "outcome": "measured",
        "group": None,
        "stats": {"median": 1e-3, "p25": 9e-4},
        "verdict": None,
        "counter_changes": [],
        "saved": False,
        "variant": variant,
        **extra,
    }


def test_summary_shows_variant_columns_only_when_variants_were_measured() -> None:
    plain = render_table(_read([_record("m")]))
    assert "speedup" not in plain[0]
    records = [
        _record("m"),
        _record(
            "m[int8]",
            "int8",
            speedup={"median": 3.2, "p25": 3.1, "p75": 3.3},
            accuracy={"rel_l2": 0.021, "top1": 0.95},
            method="dynamic: torchao",
            build_time=4.2,
            notes=["evidence: 2 layers quantized"],
        ),
    ]
    lines = render_table(_read(records))
    assert "speedup vs eager" in lines[0] and "rel-L2 vs eager" in lines[0]
    row = next(line for line in lines if "m[int8]" in line)
    assert "x3.20 (3.10-3.30)" in row and "2.1e-02 top1 95%" in row
    detail = variant_lines(_read(records))
    assert detail[0].startswith("m[int8]: dynamic: torchao, built in 4.2 s; rel-L2 2.1e-02")
    assert detail[1] == "    note: evidence: 2 layers quantized"


def test_summary_names_the_kind_of_variant_failure() -> None:
    record = _record(
        "m[amp]",
        "amp",
        outcome="fail",
        failures=["m[amp]: outputs drifted from eager fp32: rel_l2 ..."],
        failure_kinds=["accuracy"],
    )
    row = next(line for line in render_table(_read([record])) if "m[amp]" in line)
    assert row.endswith("FAIL (accuracy)")


def test_accuracy_failure_tells_the_machines_caveat() -> None:
    from pytest_torchperf.judge.numerics import check_limits

    caveat = "this CPU's int8 matrix products saturate (...)"
    [message] = check_limits(
        "mlp[int8]", {"rel_l2": 0.42, "cosine": 0.9}, {"rel_l2": 0.06}, caveat=caveat
    )
    assert message.startswith(
        "mlp[int8]: outputs drifted from eager fp32: rel_l2 0.4200 above the limit 0.0600 "
        "(this CPU's int8 matrix products saturate (...)). If the drift is expected"
    )
    assert check_limits("mlp[int8]", {"rel_l2": 0.01}, {"rel_l2": 0.06}, caveat=caveat) == []


def test_a_degenerate_reference_is_named_not_a_limit_to_widen() -> None:
    from pytest_torchperf.judge.numerics import degenerate_reference

    # Random-weight MobileNetV3 under int8: outputs ~1e-9, int8 rounds them all away.
    metrics = {
        "rel_l2": 1.0,
        "cosine": 0.0,
        "n": 1000.0,
        "ref_max_abs": 6.9e-10,
        "ref_range": 1.2e-9,
        "ref_nonfinite": 0.0,
    }
    [message] = check_limits("mobilenet[int8]", metrics, tolerances("int8"))
    assert "rel_l2 1.0000 above the limit" in message
    assert (
        "reference is degenerate: every one of its 1000 output values is within 6.90e-10 "
        "of zero (max |output| 6.90e-10)" in message
    )
    assert "widen it per test" not in message and "realistic weights" in message
    assert "all 4 of its output values are the same" in degenerate_reference(
        {"n": 4.0, "ref_max_abs": 2.0, "ref_range": 0.0}
    )
    assert "3 of its 10 output values are not finite" in degenerate_reference(
        {"n": 10.0, "ref_nonfinite": 3.0, "ref_max_abs": 1.0, "ref_range": 1.0}
    )
    # A healthy reference keeps the usual advice.
    assert degenerate_reference({"n": 10.0, "ref_max_abs": 3.0, "ref_range": 5.0}) is None
    [usual] = check_limits(
        "m[int8]", {**metrics, "ref_max_abs": 3.0, "ref_range": 5.0}, tolerances("int8")
    )
    assert "widen it per test" in usual


def test_without_log_line_drops_only_that_loggers_matching_records_inside_the_block(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """How the CUDA_HOME line and torchao's register_constant line are kept out of runs: only
    records of that logger whose message holds the text, only within the block, even when the
    block raises."""
    import logging

    from pytest_torchperf.variants.compilers import without_log_line

    log, other = logging.getLogger("torchperf.test.a"), logging.getLogger("torchperf.test.b")
    with caplog.at_level(logging.WARNING):
        with pytest.raises(RuntimeError), without_log_line("torchperf.test.a", "noisy"):
            log.warning("a noisy line")
            log.warning("a useful line")
            other.warning("another noisy line")
            raise RuntimeError
        log.warning("noisy again")
    assert [r.getMessage() for r in caplog.records] == [
        "a useful line",
        "another noisy line",
        "noisy again",
    ]
