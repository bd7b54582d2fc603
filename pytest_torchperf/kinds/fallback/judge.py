"""How the ``time-or-instructions`` kind judges (``--torchperf-fallback instructions``): time, and
where the timing verdict cannot decide, the instruction count stored beside the timing. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_torchperf.judge.inputs import Candidate, Gate
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.judge.verdict import AB_MODE, Verdict
from pytest_torchperf.kinds.instructions.judge import CountData, latest_count_verdict
from pytest_torchperf.kinds.time.judge import TimeKind
from pytest_torchperf.store.sessions import Session


class TimeOrInstructionsKind(TimeKind):
    """Time, falling back to the instruction count stored beside it where timing cannot decide:
    an inconclusive timing verdict (busy machine, spread, slower machine) or stored sessions
    without timing. The fallback verdict's basis is ``instructions`` and its message says that
    timing could not decide and why; the timing verdict's message is kept as a note."""

    name = "time-or-instructions"
    save = "pytest --torchperf-fallback instructions --torchperf-save"
    # This run falls back on the count already: where that cannot decide either, A/B pairs can.
    modes = (AB_MODE,)

    def gates_untimed(self, session: Session) -> bool:
        """A save that could not time it stored its count beside the timing: a compare judges
        that count (docs/instructions.md)."""
        return bool(session.per_call_instructions)

    def fall_back(
        self, candidate: Candidate, sessions: Sequence[Session], gate: Gate, timing: Verdict
    ) -> Verdict:
        if not (timing.outcome is Outcome.INCONCLUSIVE or timing.untimed):
            return timing
        data = CountData.of(candidate)
        counts = latest_count_verdict(
            candidate.label,
            data.instructions,
            data.uncounted,
            data.counted_with,
            sessions,
            gate.limit("max_instruction_increase"),
            self.save,
            data.recount,
        )
        if (
            timing.confirmed_in is not None
            and isinstance(counts, Verdict)
            and counts.outcome is not Outcome.FAIL
        ):
            # A trusted pass was over the limit and only its confirmation was disturbed: a
            # slowdown the count does not show (memory, threads, code Valgrind does not run)
            # stays inconclusive, with the count beside it, never a pass.
            detail = counts.message.removeprefix(f"{candidate.label}: ")
            return replace(
                timing,
                notes=(
                    *timing.notes,
                    f"its instruction count does not explain the slowdown: {detail}",
                ),
            )
        return fallback_verdict(candidate.label, timing, counts)


def fallback_verdict(label: str, timing: Verdict, counts: Verdict | str) -> Verdict:
    """The verdict of ``time-or-instructions`` where ``timing`` could not decide: the count's
    (:func:`latest_count_verdict`), worded as such; without one the timing verdict stands, with
    a note that says why."""
    if isinstance(counts, str):
        return replace(timing, notes=(*timing.notes, counts))
    why = timing.guard or ("no timing baseline" if timing.untimed else "undecided")
    detail = counts.message.removeprefix(f"{label}: ")
    return replace(
        counts,
        message=f"{label}: timing could not decide ({why}), judged by its instruction count "
        f"instead: {detail}",
        notes=(*counts.notes, f"timing: {timing.message}"),
    )


KIND = TimeOrInstructionsKind()
