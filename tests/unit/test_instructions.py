"""The instruction-count verdict (pytest_torchperf.kinds.instructions.judge_counts): pure, no Valgrind needed."""

from __future__ import annotations

import pytest

from pytest_torchperf.core.units import format_count
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.kinds.instructions.judge_counts import function_changes, judge_instructions
from pytest_torchperf.kinds.instructions.measure_callgrind import (
    KERNEL_CAPS,
    WINDOW_INSTRUCTIONS,
    InstructionCount,
    another_window,
    calls_per_window,
    kernel_caps,
)
from pytest_torchperf.kinds.instructions.measure_callgrind_output import parse_annotate, short_name

BASE = InstructionCount(
    (13_490_000.0, 13_489_700.0),
    {"at::native::cpublas::gemm": 9_000_000.0, "_PyEval_EvalFrameDefault": 1_200_000.0},
)


def _count(per_call: float, **functions: float) -> InstructionCount:
    merged = {**BASE.functions, **{k.replace("__", "::"): v for k, v in functions.items()}}
    return InstructionCount((per_call, per_call), merged)


def test_an_increase_over_the_limit_fails_with_the_functions_that_grew() -> None:
    current = _count(13_907_900.0, at__native__cpublas__gemm=9_410_000.0)
    verdict = judge_instructions("mlp", current, BASE)
    assert verdict.outcome is Outcome.FAIL
    assert verdict.message.startswith(
        "mlp: instructions +3.1% per call vs baseline (13.91 M vs 13.49 M; limit 1%)"
    )
    assert "at::native::cpublas::gemm +410 k/call" in verdict.message


def test_a_failure_all_in_lookups_says_it_may_be_the_process_s() -> None:
    """An unchanged 1.27 M-instruction model read +2.5 % in one counting process, all in type
    and dict lookups (a type-cache collision its history made): the failure now says so."""
    base = InstructionCount(
        (1_180_000.0, 1_180_000.0),
        {"_Py_dict_lookup": 50_000.0, "unicodekeys_lookup_unicode": 40_000.0, "gemm": 9e5},
    )
    looked_up = InstructionCount(
        (1_210_000.0, 1_210_000.0),
        {"_Py_dict_lookup": 58_570.0, "unicodekeys_lookup_unicode": 49_220.0, "gemm": 9e5},
    )
    verdict = judge_instructions("deep20", looked_up, base)
    assert verdict.outcome is Outcome.FAIL
    assert (
        "\n  the functions that moved most are all type-attribute and dict lookups, which can "
        "differ between processes of unchanged code" in verdict.message
    ), verdict.message
    # A change in the code's own work is not said to be the process's.
    grown = InstructionCount((1_210_000.0, 1_210_000.0), {**looked_up.functions, "gemm": 9.2e5})
    assert "moved most are all" not in judge_instructions("deep20", grown, base).message


def test_within_the_limit_passes_and_below_it_improves() -> None:
    assert judge_instructions("mlp", _count(13_550_000.0), BASE).outcome is Outcome.PASS
    assert judge_instructions("mlp", _count(13_000_000.0), BASE).outcome is Outcome.IMPROVED
    tight = judge_instructions("mlp", _count(13_550_000.0), BASE, max_increase=0.001)
    assert tight.outcome is Outcome.FAIL and "limit 0.1%" in tight.message


def test_windows_that_disagree_make_it_inconclusive_with_both_figures() -> None:
    current = InstructionCount((13_490_000.0, 13_560_000.0))
    verdict = judge_instructions("mlp", current, BASE)
    assert verdict.outcome is Outcome.INCONCLUSIVE and verdict.change is None
    assert "disagree by 0.52% (13.49 M vs 13.56 M instructions per call" in verdict.message
    assert "random inputs" in verdict.message


def test_windows_within_a_tenth_of_a_percent_are_trusted() -> None:
    current = InstructionCount((13_490_000.0, 13_500_000.0))  # 0.074 %
    assert judge_instructions("mlp", current, BASE).outcome is Outcome.PASS


def test_windows_of_a_tiny_call_within_400_instructions_are_trusted() -> None:
    base = InstructionCount((44_000.0, 44_000.0))
    close = InstructionCount((44_040.0, 43_960.0))  # 0.18 %, but 80 instructions per call
    assert judge_instructions("lin", close, base).outcome is Outcome.PASS
    apart = InstructionCount((44_500.0, 44_000.0))  # 1.1 % and 500 per call
    verdict = judge_instructions("lin", apart, base)
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "they must agree within 0.1% or 400 instructions per call" in verdict.message


def test_no_baseline_is_new() -> None:
    verdict = judge_instructions("mlp", _count(13_490_000.0), None)
    assert verdict.outcome is Outcome.NEW and "13.49 M instructions per call" in verdict.message


def test_function_changes_rank_by_size_and_count_missing_functions_from_zero() -> None:
    changes = function_changes(
        {"gemm": 9.4e6, "loop": 4.1e5, "same": 5.0},
        {"gemm": 9.0e6, "gone": 2.0e5, "same": 5.0},
    )
    assert changes == ["loop +410 k/call", "gemm +400 k/call", "gone -200 k/call"]


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (13_490_000, "13.49 M"),
        (410_000, "410 k"),
        (812, "812"),
        (2.5e9, "2.50 G"),
        (41_300, "41.3 k"),
    ],
)
def test_format_count(n: float, text: str) -> None:
    assert format_count(n) == text


@pytest.mark.parametrize(
    ("symbol", "name"),
    [
        ("???:_PyEval_EvalFrameDefault [/usr/bin/python3.11]", "_PyEval_EvalFrameDefault"),
        (
            "/usr/lib/libtorch_cpu.so:at::native::cpublas::gemm(char, char, long, float) "
            "[/usr/lib/libtorch_cpu.so]",
            "at::native::cpublas::gemm",
        ),
        (
            "???:void at::native::(anonymous namespace)::addmm_impl<float>(at::Tensor&, "
            "at::Tensor const&)",
            "void at::native::(anonymous namespace)::addmm_impl",
        ),
        ("memcpy", "memcpy"),
    ],
)
def test_short_name(symbol: str, name: str) -> None:
    assert short_name(symbol) == name


ANNOTATE = """\
--------------------------------------------------------------------------------
Profile data file 'callgrind.out.2390.2' (creator: callgrind-3.19.0)
--------------------------------------------------------------------------------
Events recorded:  Ir
Thresholds:       100

--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
67,486,278 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                  file:function
--------------------------------------------------------------------------------
45,100,000 (66.83%)  ???:at::native::cpublas::gemm(char, char, long) [/x/libtorch_cpu.so]
 6,000,000 ( 8.89%)  ???:_PyEval_EvalFrameDefault [/usr/bin/python3.11]
   120,000 ( 0.18%)  ./string/memcpy.S:memcpy [/lib/libc.so.6]
    10,000 ( 0.01%)  ???:at::native::cpublas::gemm(char, char, long, float) [/x/libtorch_cpu.so]
"""


def test_parse_annotate_reads_the_total_and_sums_overloads_by_short_name() -> None:
    total, functions = parse_annotate(ANNOTATE)
    assert total == 67_486_278
    assert functions == {
        "at::native::cpublas::gemm": 45_110_000,
        "_PyEval_EvalFrameDefault": 6_000_000,
        "memcpy": 120_000,
    }


def test_parse_annotate_without_totals_says_so() -> None:
    from pytest_torchperf.kinds.instructions.measure_callgrind import CallgrindError

    with pytest.raises(CallgrindError, match="no PROGRAM TOTALS"):
        parse_annotate("nothing here\n")


def test_parse_annotate_finds_ir_among_the_cache_simulation_events() -> None:
    text = """\
Events recorded:  Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
Events shown:     Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
--------------------------------------------------------------------------------
Ir                  Dr                 Dw  I1mr  D1mr  D1mw  ILmr DLmr DLmw
--------------------------------------------------------------------------------
68,919,066 (100.0%) 21,357,453 (100.0%) 1,369,987 (100.0%) 101,634 (100.0%) . . 32 41 301  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                  Dr                 Dw  I1mr  D1mr  D1mw  ILmr DLmr DLmw  file:function
--------------------------------------------------------------------------------
45,000,000 (65.29%) 9,000,000 (42.14%) . . . . . . .  ???:mkl_blas_avx2_sgemm_kernel_0 [/x/libmkl.so]
"""
    total, functions = parse_annotate(text)
    assert total == 68_919_066
    assert functions == {"mkl_blas_avx2_sgemm_kernel_0": 45_000_000}


def test_file_total_reads_the_totals_line_not_the_wrapped_summary() -> None:
    from pytest_torchperf.kinds.instructions.measure_callgrind_output import (
        CallgrindError,
        file_total,
    )

    part = "version: 1\nevents: Ir\npart: 3\nsummary: 18446744073709002745\ntotals: 649449\n"
    assert file_total(part) == 649_449
    cache = "events: Ir Dr Dw\nsummary: 1 2 3\ntotals: 68919066 21357453 1369987\n"
    assert file_total(cache) == 68_919_066
    with pytest.raises(CallgrindError, match="no totals"):
        file_total("events: Ir\n")


def test_short_name_drops_the_recursion_depth() -> None:
    assert short_name("???:_PyEval_EvalFrameDefault'2 [/usr/bin/python3.11]") == (
        "_PyEval_EvalFrameDefault"
    )


def test_jit_code_without_a_symbol_is_one_function_whatever_its_address() -> None:
    assert short_name("0x00000000dcdbf000") == short_name("???:0x00000000dce69000")
    assert short_name("0x00000000dcdbf000") == "[JIT-generated code]"
    text = """Events shown: Ir
500 (100.0%)  PROGRAM TOTALS
--------------------------------------------------------------------------------
Ir                    file:function
--------------------------------------------------------------------------------
300 (60.00%)  ???:0x00000000dcdbf000 [???]
200 (40.00%)  ???:0x00000000dce69000 [???]
"""
    total, functions = parse_annotate(text)
    assert total == 500 and functions == {"[JIT-generated code]": 500}


def test_kernel_caps_on_x86_default_to_kernels_without_fma_and_keep_the_users_own() -> None:
    assert kernel_caps({}, "x86_64") == KERNEL_CAPS
    assert kernel_caps({}, "AMD64") == KERNEL_CAPS
    mine = kernel_caps({"ONEDNN_MAX_CPU_ISA": "AVX2"}, "x86_64")
    assert mine == {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    # An empty value is no choice: the cap still applies.
    assert kernel_caps({"MKL_ENABLE_INSTRUCTIONS": ""}, "x86_64") == KERNEL_CAPS


def test_kernel_caps_are_x86_only() -> None:
    assert kernel_caps({}, "aarch64") == {}
    assert kernel_caps({"ONEDNN_MAX_CPU_ISA": "AVX"}, "arm64") == {}


def test_windows_are_sized_by_instructions_between_1_and_100_calls() -> None:
    assert calls_per_window(WINDOW_INSTRUCTIONS / 10) == 10
    assert calls_per_window(WINDOW_INSTRUCTIONS / 10 + 1) == 10  # rounded up to reach the aim
    assert calls_per_window(200_000) == 100  # a tiny MLP: capped
    assert calls_per_window(60_000_000) == 2  # an int8 MLP: two calls reach the aim
    assert calls_per_window(700_000_000) == 1  # a ResNet: one call per window
    assert calls_per_window(0) == 100  # nothing counted (not under callgrind): the cap


def test_the_decision_is_made_before_and_apart_from_its_wording() -> None:
    from pytest_torchperf.kinds.instructions.judge_counts import (
        decide_instructions,
        word_instructions,
    )

    current = _count(13_907_900.0, at__native__cpublas__gemm=9_410_000.0)
    decision = decide_instructions(current, BASE, 0.01)
    assert (decision.outcome, decision.case) == (Outcome.FAIL, "compared")
    assert decision.change == pytest.approx(13_907_900.0 / BASE.per_call - 1)
    assert decision.why[0].startswith("at::native::cpublas::gemm +")
    worded = word_instructions("mlp", decision, current, BASE, 0.01)
    assert worded == judge_instructions("mlp", current, BASE, 0.01).message
    assert decide_instructions(current, None).case == "new"
    uneven = InstructionCount((13_490_000.0, 13_990_000.0))
    assert decide_instructions(uneven, BASE).outcome is Outcome.INCONCLUSIVE


def test_a_valgrind_helper_that_hangs_or_is_missing_is_a_clear_error() -> None:
    """callgrind_annotate ran without a timeout: a stuck one hung the counting process."""
    from pytest_torchperf.kinds.instructions import measure_callgrind as callgrind
    from pytest_torchperf.kinds.instructions.measure_callgrind import CallgrindError

    with pytest.raises(CallgrindError, match=r"^sleep 30 did not finish within 1 s \(it takes"):
        callgrind._tool(["sleep", "30"], timeout=1.0)
    with pytest.raises(CallgrindError, match="no-such-valgrind-tool is not on PATH: it comes with"):
        callgrind._tool(["no-such-valgrind-tool"], timeout=5.0)


def test_a_count_without_its_baseline_says_how_to_save_one() -> None:
    """A newcomer who had saved a timing baseline read `(no baseline yet)` and `Record baselines
    with pytest --torchperf-save`, which stores no count."""
    verdict = judge_instructions("conv", _count(1_130_000.0), None)
    assert verdict.outcome is Outcome.NEW
    assert verdict.message == (
        "conv: 1.13 M instructions per call (no instruction-count baseline yet; save one with "
        "pytest --torchperf-instructions --torchperf-save: a timing baseline is not one)"
    )


def test_windows_that_disagree_are_counted_again_at_most_twice() -> None:
    """A deep stack of Linear+ReLU pairs (3.8 M per call) read 3,804 k and 3,800 k per call in
    one save in three and was refused as a baseline: a one-off cost in one window."""
    settle = [3_900_000.0]
    assert another_window([]) and another_window(settle) and another_window([*settle, 3.8e6])
    assert not another_window([*settle, 3_800_000.0, 3_800_300.0])  # agree within 0.1 %
    assert not another_window([*settle, 44_000.0, 43_700.0])  # within 400 per call
    disagreeing = [*settle, 3_804_218.0, 3_799_521.0]
    assert another_window(disagreeing)
    assert not another_window([*disagreeing, 3_799_600.0])  # the last two agree: kept
    assert another_window([*disagreeing, 3_804_000.0])
    # Work that varies from call to call disagrees every time: it stops there, refused.
    assert not another_window([*disagreeing, 3_804_000.0, 3_799_000.0])


def test_a_profiles_total_is_read_from_its_two_ends(tmp_path) -> None:
    from pytest_torchperf.kinds.instructions.measure_callgrind_output import profile_total

    body = "".join(f"fn=(f{i}) torch_function_{i}\n{i} {i * 7}\n" for i in range(20_000))
    path = tmp_path / "callgrind.out.1.2"
    path.write_text(f"version: 1\nevents: Dr Ir\npart: 2\n{body}summary: 5 9\ntotals: 5 649449\n")
    assert path.stat().st_size > 100_000  # the middle is never read
    assert profile_total(path) == 649_449  # the Ir column, named at the head
    path.write_text("events: Ir\ntotals: 12\n")
    assert profile_total(path) == 12
