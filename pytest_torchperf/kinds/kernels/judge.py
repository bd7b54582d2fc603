"""How the ``time-and-kernels`` kind judges (:class:`TimeAndKernelsKind`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.kind_protocol import KindChecks
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.kinds.kernels.judge_times import judge_kernels, launch_note
from pytest_torchperf.kinds.kernels.measure import KernelTimes
from pytest_torchperf.kinds.time.judge import TimeKind
from pytest_torchperf.store.sessions import Session, timed_sessions


class TimeAndKernelsKind(TimeKind):
    """Wall time as :class:`TimeKind` judges it, and beside it the GPU kernel time of the call
    (:mod:`pytest_torchperf.kinds.kernels.judge_times`) against the kernel times stored in the timing
    sessions, at ``max_kernel_slowdown``: a slower or an added kernel fails even where the wall
    time is launch-bound and too noisy to gate. The wall-time verdict carries the kernel
    verdict and, when the kernels filled under half the wall time, a launch-bound note."""

    name = "time-and-kernels"

    def extra_checks(
        self, candidate: Candidate, sessions: Sequence[Session], gate: Gate
    ) -> KindChecks:
        # Its own sections: the kernel time of this call, or why there is none.
        kernels = candidate.sections.get("kernels")
        if kernels is None:
            why = candidate.sections.get("unprofiled") or "not profiled"
            return KindChecks(notes=[f"GPU kernel time not measured: {why}"])
        current = KernelTimes.from_record(kernels)
        stored = [KernelTimes.from_record(k) for k in map(_kernels, timed_sessions(sessions)) if k]
        verdict = judge_kernels(
            candidate.label, current, stored, gate.limit("max_kernel_slowdown"), gate.max_widening
        )
        # The verdict as a note on the wall time's (a failure or an undecided one is said as
        # such too), and whether the wall time is launch-bound.
        notes = [verdict.message.removeprefix(f"{candidate.label}: "), launch_note(current)]
        checks = KindChecks(
            notes=[n for n in notes if n],
            gated=["kernels"] if verdict.outcome in _JUDGED else [],
        )
        if verdict.outcome is Outcome.FAIL:
            checks.failures.append(Failure("kernel time", verdict.message))
        elif verdict.outcome is Outcome.INCONCLUSIVE:
            checks.warnings.append(verdict.message)
        return checks


#: Kernel-time outcomes that judged the figure.
_JUDGED = (Outcome.PASS, Outcome.FAIL, Outcome.IMPROVED)


KIND = TimeAndKernelsKind()


def _kernels(session: Session) -> Mapping[str, object] | None:
    """The kernel times a timing session stores (this kind's own key, kept as read), or None."""
    kernels = session.extra("kernels")
    return kernels if isinstance(kernels, Mapping) else None
