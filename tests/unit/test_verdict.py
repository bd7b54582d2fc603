"""Unit tests of pytest_torchperf.verdict.judge, driven by synthetic samples (no timing at all)."""

from __future__ import annotations

import inspect
import statistics

import pytest

from pytest_torchperf.stats import summarize
from pytest_torchperf.verdict import (
    MAX_RELATIVE_IQR,
    MIN_CPU_SHARE,
    NOISE_AWARE_MIN_SESSIONS,
    NOISE_CV_FACTOR,
    Outcome,
    Sample,
    effective_tolerance,
    guard_problem,
    judge,
)

MS = 1e-3


def sample(p25: float, *, noisy: bool = False, cpu_share: float | None = None) -> Sample:
    """A Sample whose p25 is exactly ``p25``; ``noisy`` makes IQR/median 2/3 (> 0.25)."""
    times = (p25, p25, 2 * p25, 2 * p25) if noisy else (p25,) * 8
    s = Sample(summarize(times), cpu_share, times)
    assert s.statistic == pytest.approx(p25)
    return s


class Remeasure:
    """A remeasure callable handing out queued samples and counting its calls."""

    def __init__(self, *samples: Sample) -> None:
        self.queue = list(samples)
        self.calls = 0

    def __call__(self) -> Sample:
        self.calls += 1
        if not self.queue:
            raise AssertionError("remeasure called more often than expected")
        return self.queue.pop(0)


def never() -> Sample:
    raise AssertionError("remeasure must not be called")


BASE = [1 * MS, 1 * MS, 1 * MS]  # three sessions of 1 ms: no noise widening


# --------------------------------------------------------------------------------------------------
# Sample, guard_problem, effective_tolerance
# --------------------------------------------------------------------------------------------------


def test_sample_statistic_is_p25():
    s = Sample(summarize([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert s.statistic == s.summary.p25 == 2.0
    assert s.cpu_share is None and s.times == ()


def test_constants():
    assert MIN_CPU_SHARE == 0.9
    assert MAX_RELATIVE_IQR == 0.25
    assert NOISE_AWARE_MIN_SESSIONS == 5
    assert NOISE_CV_FACTOR == 3.0


def test_guard_accepts_clean_sample():
    assert guard_problem(sample(MS)) is None
    assert guard_problem(sample(MS, cpu_share=0.95)) is None
    assert guard_problem(sample(MS, cpu_share=0.9)) is None  # boundary is inclusive
    assert guard_problem(sample(MS, cpu_share=None)) is None  # GPU: no CPU share


def test_guard_rejects_low_cpu_share():
    problem = guard_problem(sample(MS, cpu_share=0.5))
    assert problem is not None
    assert "CPU share 0.50 < 0.90" in problem


def test_guard_rejects_gross_spread():
    problem = guard_problem(sample(MS, noisy=True))
    assert problem is not None
    assert "spread IQR/median 66.67% > 25%" in problem


def test_guard_thresholds_are_parameters():
    assert guard_problem(sample(MS, cpu_share=0.5), min_cpu_share=0.4) is None
    assert guard_problem(sample(MS, noisy=True), max_relative_iqr=1.0) is None


def test_effective_tolerance_few_sessions_widens_to_their_range():
    assert effective_tolerance(0.1, []) == (0.1, None)
    assert effective_tolerance(0.1, [1.0]) == (0.1, None)
    assert effective_tolerance(0.1, [1.0, 1.02, 1.05])[0] == 0.1  # agree better than the limit
    t, cv = effective_tolerance(0.1, [1.0, 1.9, 1.0, 1.02])  # one process ran 90% slower
    assert t == pytest.approx(0.9)
    assert cv is not None


def test_effective_tolerance_widens_with_noise():
    stats = [1.0, 1.2, 0.8, 1.1, 0.9]  # robust CV = 1.4826 * 0.1 / 1.0
    t, cv = effective_tolerance(0.1, stats)
    assert cv == pytest.approx(0.14826)
    assert t == pytest.approx(3 * 0.14826)


def test_effective_tolerance_never_narrows():
    t, cv = effective_tolerance(0.1, [1.0, 1.001, 0.999, 1.0, 1.0])
    assert cv is not None and 3 * cv < 0.1
    assert t == 0.1
    t, cv = effective_tolerance(0.1, [1.0] * 6)
    assert (t, cv) == (0.1, 0.0)


# --------------------------------------------------------------------------------------------------
# judge: every outcome
# --------------------------------------------------------------------------------------------------


def test_new_without_baseline_never_remeasures():
    first = sample(MS)
    j = judge("fwd", first, [], 0.1, never)
    v = j.verdict
    assert v.outcome is Outcome.NEW
    assert "fwd: no baseline for this environment yet" in v.message
    assert "--torchperf-save" in v.message
    assert v.tolerance == 0.1
    assert v.ratio is None and v.baseline_statistic is None
    assert v.remeasures == 0
    assert j.sample is first and j.samples == [first]


def test_new_even_when_first_sample_is_contaminated():
    rm = Remeasure()
    j = judge("fwd", sample(MS, cpu_share=0.1), [], 0.1, rm)
    assert j.verdict.outcome is Outcome.NEW
    assert rm.calls == 0


def test_pass_within_limit():
    first = sample(1.05 * MS, cpu_share=0.99)
    rm = Remeasure()
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.PASS
    assert not v.failed and not v.suspicious
    assert rm.calls == 0 and v.remeasures == 0
    assert v.ratio == pytest.approx(1.05)
    assert v.baseline_statistic == pytest.approx(MS)
    assert v.candidate_statistic == pytest.approx(1.05 * MS)
    assert v.tolerance == v.effective_tolerance == 0.1
    assert v.baseline_sessions == 3
    assert v.baseline_cv == 0.0
    assert v.confirm_ratio is None
    assert v.notes == ()
    assert v.message == "fwd: +5.0% vs baseline (limit 10%)"
    assert j.sample is first and j.samples == [first]


def test_pass_exactly_at_limit_is_not_a_failure():
    # Binary-exact numbers: ratio == 1 + tolerance exactly.
    rm = Remeasure()
    j = judge("fwd", sample(1.25), [1.0], 0.25, rm)
    assert j.verdict.outcome is Outcome.PASS
    assert rm.calls == 0


def test_exactly_at_improvement_limit_is_pass():
    j = judge("fwd", sample(0.75), [1.0], 0.25, never)
    assert j.verdict.outcome is Outcome.PASS


def test_improved():
    first = sample(0.5 * MS)
    rm = Remeasure()
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.IMPROVED
    assert rm.calls == 0 and v.remeasures == 0
    assert v.ratio == pytest.approx(0.5)
    assert "fwd: 50.0% faster than baseline" in v.message
    assert "p25 500 us vs 1 ms" in v.message
    assert "limit 10%" in v.message
    assert "--torchperf-save --torchperf-reset" in v.message
    assert j.sample is first


def test_fail_confirmed_by_remeasure():
    first = sample(1.5 * MS, cpu_share=0.98)
    confirm = sample(1.4 * MS, cpu_share=0.95)
    rm = Remeasure(confirm)
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.FAIL
    assert v.failed
    assert rm.calls == 1 and v.remeasures == 1
    # ratio is that of the reported (confirming) sample; the first pass is kept as first_ratio
    assert v.ratio == pytest.approx(1.4) and v.first_ratio == pytest.approx(1.5)
    assert v.confirm_ratio == pytest.approx(1.4)
    assert v.candidate_statistic == pytest.approx(statistics.median([1.5 * MS, 1.4 * MS]))
    assert v.baseline_statistic == pytest.approx(MS)
    assert not v.suspicious
    msg = v.message
    assert msg.startswith("fwd: 50.0% slower than baseline")
    assert "p25 1.5 ms vs 1 ms" in msg
    assert "confirmed by re-measure: +40.0%" in msg
    assert "limit 10%" in msg
    # the confidence line
    assert "how sure:" in msg
    assert "spread within run IQR/median 0% and 0%" in msg
    assert "baseline: median of 3 sessions, CV 0%" in msg
    assert "CPU share 0.95" in msg
    assert j.sample is confirm
    assert j.samples == [first, confirm]


def test_fail_with_single_baseline_session_mentions_session_count():
    rm = Remeasure(sample(2 * MS))
    j = judge("fwd", sample(2 * MS), [MS], 0.1, rm)
    assert j.verdict.outcome is Outcome.FAIL
    assert j.verdict.baseline_cv is None
    assert "baseline: 1 saved session" in j.verdict.message
    assert "sessions" not in j.verdict.message.split("how sure:")[1]
    assert "CPU share" not in j.verdict.message  # no CPU share known (GPU)
    assert rm.calls == 1


def test_suspicious_pass_when_remeasure_contradicts():
    first = sample(1.5 * MS)
    confirm = sample(1.02 * MS)
    rm = Remeasure(confirm)
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.PASS
    assert v.suspicious is True
    assert v.remeasures == 1 and rm.calls == 1
    assert v.ratio == pytest.approx(1.02) and v.first_ratio == pytest.approx(1.5)
    assert v.confirm_ratio == pytest.approx(1.02)
    assert v.candidate_statistic == pytest.approx(1.02 * MS)
    assert "within limit after re-measure (+50.0% first, +2.0% re-measured in this process; limit 10%)" in v.message
    assert j.sample is confirm


def test_inconclusive_when_cpu_share_low_twice():
    first = sample(3 * MS, cpu_share=0.5)
    second = sample(2 * MS, cpu_share=0.6)
    rm = Remeasure(second)
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.INCONCLUSIVE
    assert not v.failed
    assert rm.calls == 1 and v.remeasures == 1
    assert v.ratio == pytest.approx(2.0)  # ratio of the re-measure
    assert v.candidate_statistic == pytest.approx(2 * MS)
    assert "fwd: inconclusive, +100.0% vs baseline cannot be trusted" in v.message
    assert "CPU share 0.60 < 0.90" in v.message
    assert "re-measured once, still bad" in v.message
    assert "--torchperf-strict" in v.message
    assert j.sample is second and j.samples == [first, second]


def test_inconclusive_when_spread_gross_twice():
    rm = Remeasure(sample(MS, noisy=True))
    j = judge("fwd", sample(MS, noisy=True), BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.INCONCLUSIVE
    assert rm.calls == 1 and v.remeasures == 1
    assert "spread IQR/median 66.67% > 25%" in v.message


def test_inconclusive_even_for_a_huge_slowdown_when_guard_fails_twice():
    rm = Remeasure(sample(10 * MS, cpu_share=0.2))
    j = judge("fwd", sample(10 * MS, cpu_share=0.2), BASE, 0.1, rm)
    assert j.verdict.outcome is Outcome.INCONCLUSIVE  # never FAIL on untrusted samples
    assert rm.calls == 1


def test_guard_recovery_then_normal_pass():
    first = sample(5 * MS, cpu_share=0.3)
    second = sample(1.01 * MS, cpu_share=0.99)
    rm = Remeasure(second)
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.PASS
    assert not v.suspicious
    assert rm.calls == 1 and v.remeasures == 1
    assert v.ratio == pytest.approx(1.01)  # judged on the trustworthy re-measure
    assert v.candidate_statistic == pytest.approx(1.01 * MS)
    assert j.sample is second and j.samples == [first, second]


def test_guard_recovery_then_improved():
    rm = Remeasure(sample(0.5 * MS))
    j = judge("fwd", sample(MS, noisy=True), BASE, 0.1, rm)
    assert j.verdict.outcome is Outcome.IMPROVED
    assert rm.calls == 1 and j.verdict.remeasures == 1


def test_guard_recovery_then_confirmed_fail_uses_two_remeasures():
    first = sample(2 * MS, noisy=True)
    second = sample(2 * MS)
    confirm = sample(2 * MS)
    rm = Remeasure(second, confirm)
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.FAIL
    assert rm.calls == 2 and v.remeasures == 2
    assert j.samples == [first, second, confirm]
    assert j.sample is confirm


def test_inconclusive_when_confirming_remeasure_contaminated():
    first = sample(1.5 * MS, cpu_share=0.99)
    confirm = sample(1.5 * MS, cpu_share=0.4)
    rm = Remeasure(confirm)
    j = judge("fwd", first, BASE, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.INCONCLUSIVE
    assert rm.calls == 1 and v.remeasures == 1
    assert v.ratio == pytest.approx(1.5)
    assert v.confirm_ratio == pytest.approx(1.5)
    assert v.candidate_statistic == pytest.approx(1.5 * MS)
    assert "fwd: inconclusive, +50.0% vs baseline but the confirming re-measure (in this process) could not be trusted" \
        in v.message
    assert "CPU share 0.40 < 0.90" in v.message
    assert j.sample is first  # the trustworthy pass, whose figures the message quotes


def test_inconclusive_when_confirming_remeasure_too_spread():
    rm = Remeasure(sample(1.5 * MS, noisy=True))
    j = judge("fwd", sample(1.5 * MS), BASE, 0.1, rm)
    assert j.verdict.outcome is Outcome.INCONCLUSIVE
    assert "spread IQR/median" in j.verdict.message
    assert rm.calls == 1


def test_baseline_is_median_of_sessions():
    # p25s of sessions: median is 2 ms, far from the mean (~34 ms).
    rm = Remeasure()
    j = judge("fwd", sample(2.1 * MS), [1 * MS, 2 * MS, 100 * MS], 0.1, rm)
    assert j.verdict.baseline_statistic == pytest.approx(2 * MS)
    assert j.verdict.ratio == pytest.approx(1.05)
    assert j.verdict.outcome is Outcome.PASS
    assert rm.calls == 0
    # Even count: mean of the middle two.
    j = judge("fwd", sample(2.5 * MS), [1 * MS, 2 * MS, 3 * MS, 100 * MS], 0.1, never)
    assert j.verdict.baseline_statistic == pytest.approx(2.5 * MS)
    assert j.verdict.baseline_sessions == 4


def test_noise_aware_widening_with_five_sessions():
    sessions = [1.0 * MS, 1.2 * MS, 0.8 * MS, 1.1 * MS, 0.9 * MS]  # CV ~14.8% -> tolerance ~44.5%
    rm = Remeasure()
    j = judge("fwd", sample(1.3 * MS), sessions, 0.1, rm)  # +30%: would fail at 10%
    v = j.verdict
    assert v.outcome is Outcome.PASS
    assert rm.calls == 0
    assert v.tolerance == 0.1
    assert v.effective_tolerance == pytest.approx(3 * 0.14826)
    assert v.baseline_cv == pytest.approx(0.14826)
    assert v.baseline_sessions == 5
    assert len(v.notes) == 1
    note = v.notes[0]
    assert "baseline noise (CV 14.83% over 5 sessions)" in note
    assert "too high to resolve a 10% slowdown" in note
    assert "judged at 44.48%" in note
    assert "limit 44.48%" in v.message


def test_noise_aware_widening_still_fails_beyond_widened_limit():
    sessions = [1.0 * MS, 1.2 * MS, 0.8 * MS, 1.1 * MS, 0.9 * MS]
    rm = Remeasure(sample(1.6 * MS))
    j = judge("fwd", sample(1.6 * MS), sessions, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.FAIL
    assert rm.calls == 1
    assert "limit 44.48%" in v.message
    assert "baseline: median of 5 sessions, CV 14.83%" in v.message
    assert v.notes and "judged at 44.48%" in v.notes[0]


def test_noise_aware_never_narrows_tolerance():
    sessions = [1.0 * MS, 1.001 * MS, 0.999 * MS, 1.0 * MS, 1.0 * MS, 1.0 * MS]  # CV ~0.15%
    rm = Remeasure(sample(1.09 * MS))
    j = judge("fwd", sample(1.09 * MS), sessions, 0.1, rm)
    v = j.verdict
    assert v.outcome is Outcome.PASS  # +9% passes at 10% (would fail at 3 x CV ~ 0.4%)
    assert rm.calls == 0
    assert v.effective_tolerance == 0.1
    assert v.notes == ()


def test_four_sessions_that_disagree_widen_the_limit_with_a_note():
    sessions = [1.0 * MS, 1.2 * MS, 0.8 * MS, 1.1 * MS]  # 50% apart: fresh processes disagree
    rm = Remeasure(sample(1.3 * MS))
    j = judge("fwd", sample(1.3 * MS), sessions, 0.1, rm)
    v = j.verdict
    assert v.effective_tolerance == pytest.approx(0.5)
    assert "the 4 stored sessions differ by 50% among themselves" in v.notes[0]
    assert v.outcome is Outcome.PASS  # +24% vs their median is within what they disagree by
    assert rm.calls == 0
    far = judge("fwd", sample(1.8 * MS), sessions, 0.1, Remeasure(sample(1.8 * MS))).verdict
    assert far.outcome is Outcome.FAIL  # +71%: beyond the spread, still caught


def test_notes_carried_on_inconclusive_verdicts():
    sessions = [1.0 * MS, 1.2 * MS, 0.8 * MS, 1.1 * MS, 0.9 * MS]
    rm = Remeasure(sample(MS, cpu_share=0.1))
    j = judge("fwd", sample(MS, cpu_share=0.1), sessions, 0.1, rm)
    assert j.verdict.outcome is Outcome.INCONCLUSIVE
    assert len(j.verdict.notes) == 1


def test_remeasure_called_at_most_twice_in_all_scenarios():
    # Worst case: guard fails once, then a slowdown needs confirming.
    rm = Remeasure(sample(5 * MS), sample(5 * MS, cpu_share=0.1))
    j = judge("fwd", sample(5 * MS, cpu_share=0.1), BASE, 0.1, rm)
    assert j.verdict.outcome is Outcome.INCONCLUSIVE
    assert rm.calls == 2 and j.verdict.remeasures == 2


@pytest.mark.skipif("min_cpu_share" not in inspect.signature(judge).parameters,
                    reason="judge has no configurable guard thresholds")
def test_judge_guard_thresholds_configurable():
    rm = Remeasure()
    j = judge("fwd", sample(MS, cpu_share=0.5), BASE, 0.1, rm, min_cpu_share=0.0,
              max_relative_iqr=0.25)
    assert j.verdict.outcome is Outcome.PASS and rm.calls == 0
    j = judge("fwd", sample(MS, noisy=True), BASE, 0.1, rm, max_relative_iqr=1.0)
    assert j.verdict.outcome is Outcome.PASS and rm.calls == 0
    rm = Remeasure(sample(MS, cpu_share=0.97))
    j = judge("fwd", sample(MS, cpu_share=0.97), BASE, 0.1, rm, min_cpu_share=0.99)
    assert j.verdict.outcome is Outcome.INCONCLUSIVE and rm.calls == 1
    assert "CPU share 0.97 < 0.99" in j.verdict.message


# --------------------------------------------------------------------------------------------------
# Outcome and Verdict
# --------------------------------------------------------------------------------------------------


def test_outcome_str_is_value():
    assert str(Outcome.FAIL) == "fail"
    assert f"{Outcome.INCONCLUSIVE}" == "inconclusive"
    assert Outcome("pass") is Outcome.PASS
    assert {o.value for o in Outcome} == {"pass", "fail", "inconclusive", "improved", "new", "measured"}


def test_verdict_to_dict_round_trips_fields():
    rm = Remeasure(sample(1.5 * MS))
    sessions = [1.0 * MS, 1.2 * MS, 0.8 * MS, 1.1 * MS, 0.9 * MS]
    v = judge("fwd", sample(1.6 * MS), sessions, 0.1, rm).verdict
    d = v.to_dict()
    assert d["outcome"] == "fail"
    assert d["message"] == v.message
    assert d["ratio"] == v.ratio and d["confirm_ratio"] == v.confirm_ratio
    assert d["baseline_statistic"] == v.baseline_statistic
    assert d["candidate_statistic"] == v.candidate_statistic
    assert d["tolerance"] == 0.1 and d["effective_tolerance"] == v.effective_tolerance
    assert d["baseline_sessions"] == 5 and d["baseline_cv"] == v.baseline_cv
    assert d["suspicious"] is False and d["remeasures"] == 1
    assert d["notes"] == list(v.notes) and isinstance(d["notes"], list)
    import json
    json.dumps(d)  # JSON-friendly


# ------------------------------------------------------------------------------------------------
# Calibration kernel timed alongside: the machine's own speed factored out
# ------------------------------------------------------------------------------------------------

CAL_BASE = [(1 * MS, 10e-6)] * 3  # stored sessions: 1 ms target, 10 us calibration kernel


def calibrated(p25: float, calibration: float, **kw) -> Sample:
    from dataclasses import replace

    return replace(sample(p25, **kw), calibration=calibration)


def test_slowdown_the_machine_explains_in_both_passes_is_inconclusive():
    # Target +50%, but the calibration kernel is +48% too: the machine is slower, not the code.
    rm = Remeasure(calibrated(1.5 * MS, 14.8e-6))
    j = judge("fwd", calibrated(1.5 * MS, 14.8e-6), BASE, 0.1, rm, baseline_calibrated=CAL_BASE)
    v = j.verdict
    assert v.outcome is Outcome.INCONCLUSIVE and rm.calls == 1
    assert v.machine_ratio == pytest.approx(1.48)
    assert v.normalized_ratio == pytest.approx(1.5 / 1.48)
    assert "the machine itself ran +48.0% on the calibration kernel timed alongside" in v.message
    assert "with that factored out the change is +1.4%, within the limit 10%" in v.message


def test_real_slowdown_on_a_steady_machine_still_fails_and_says_so():
    rm = Remeasure(calibrated(1.45 * MS, 10.1e-6))
    j = judge("fwd", calibrated(1.5 * MS, 10e-6), BASE, 0.1, rm, baseline_calibrated=CAL_BASE)
    v = j.verdict
    assert v.outcome is Outcome.FAIL and rm.calls == 1
    assert "machine speed +1.0% on the calibration kernel, so +43.6% with it factored out" in v.message


def test_one_pass_blaming_the_machine_is_not_enough():
    rm = Remeasure(calibrated(1.5 * MS, 15e-6))  # first pass: steady machine; confirm: slow one
    j = judge("fwd", calibrated(1.5 * MS, 10e-6), BASE, 0.1, rm, baseline_calibrated=CAL_BASE)
    assert j.verdict.outcome is Outcome.FAIL


def test_a_slow_machine_in_both_passes_needs_both_to_exceed_the_limit_factored_out():
    # Machine +65% in both passes; the code +11% beyond it in one pass and +5% in the other.
    rm = Remeasure(calibrated(1.65 * 1.05 * MS, 16.5e-6))
    j = judge("fwd", calibrated(1.65 * 1.11 * MS, 16.5e-6), BASE, 0.1, rm,
              baseline_calibrated=CAL_BASE)
    assert j.verdict.outcome is Outcome.INCONCLUSIVE
    # +30% beyond the machine's slowdown in both passes: a real regression on a slow machine.
    rm = Remeasure(calibrated(1.65 * 1.3 * MS, 16.5e-6))
    j = judge("fwd", calibrated(1.65 * 1.3 * MS, 16.5e-6), BASE, 0.1, rm,
              baseline_calibrated=CAL_BASE)
    assert j.verdict.outcome is Outcome.FAIL


def test_machine_must_be_clearly_slower_to_be_blamed():
    # Calibration only +4% (< half the 10% limit): the +30% is not the machine's doing.
    rm = Remeasure(calibrated(1.3 * MS, 10.4e-6))
    j = judge("fwd", calibrated(1.3 * MS, 10.4e-6), BASE, 0.1, rm, baseline_calibrated=CAL_BASE)
    assert j.verdict.outcome is Outcome.FAIL


def test_machine_rule_needs_every_stored_session_calibrated():
    # An upgrade left old sessions without calibration: no machine comparison, plain verdict.
    stats = [1 * MS] * 4 + [1.3 * MS]
    rm = Remeasure(calibrated(1.3 * MS, 1e-6))
    j = judge("fwd", calibrated(1.3 * MS, 1e-6), stats, 0.15, rm,
              baseline_calibrated=[(1.3 * MS, 1e-6)])
    assert j.verdict.machine_ratio is None
    assert j.verdict.outcome is Outcome.FAIL


def test_machine_figures_add_up():
    rm = Remeasure(calibrated(1.6 * MS, 15e-6))
    v = judge("fwd", calibrated(1.6 * MS, 15e-6), BASE, 0.1, rm, baseline_calibrated=CAL_BASE).verdict
    assert v.normalized_ratio == pytest.approx(v.ratio / v.machine_ratio)


def test_speedup_the_machine_explains_is_not_an_improvement():
    j = judge("fwd", calibrated(0.7 * MS, 7e-6), BASE, 0.1, Remeasure(), baseline_calibrated=CAL_BASE)
    v = j.verdict
    assert v.outcome is Outcome.PASS
    assert v.normalized_ratio == pytest.approx(1.0)
    assert any("not an improvement" in note for note in v.notes)


def test_without_calibration_on_either_side_nothing_changes():
    j = judge("fwd", sample(1.5 * MS), BASE, 0.1, Remeasure(sample(1.5 * MS)),
              baseline_calibrated=CAL_BASE)
    assert j.verdict.outcome is Outcome.FAIL and j.verdict.machine_ratio is None
    j = judge("fwd", calibrated(1.5 * MS, 15e-6), BASE, 0.1, Remeasure(sample(1.5 * MS)))
    assert j.verdict.outcome is Outcome.FAIL


def test_machine_disturbance_holds_a_pass_against_the_lowest_reference():
    from pytest_torchperf.verdict import machine_disturbance

    stored, run = ("the stored sessions", [4.7e-6, 4.8e-6, 4.6e-6]), ("this run", [7.4e-6, 7.6e-6])
    ratio, reference, what = machine_disturbance(7.59e-6, [stored, run])
    assert what == "the stored sessions" and reference == 4.7e-6
    assert ratio == pytest.approx(7.59 / 4.7)
    assert machine_disturbance(5.5e-6, [stored, run]) is None  # +17 %: within 25 %
    assert machine_disturbance(7.59e-6, [("this run", [7.4e-6, 7.6e-6])]) is None
    assert machine_disturbance(9.6e-6, [("this run", [7.4e-6, 7.6e-6])])[2] == "this run"
    assert machine_disturbance(9.6e-6, [("the stored sessions", []), ("this run", [])]) is None
    assert machine_disturbance(None, [stored]) is None  # GPU: no calibration kernel
