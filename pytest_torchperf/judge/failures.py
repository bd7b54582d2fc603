"""A failure beyond the timing verdict and the counters, with its kind decided where it is found.
Pure.

A failure is read as its sentence everywhere (the test's failure message, every report), so
:class:`Failure` is that sentence (a ``str``) carrying its :attr:`Failure.kind`. Labels
(:func:`pytest_torchperf.judge.labels.outcome_label`) are made from the kinds, never from the
words: rewording a sentence cannot change a label. Records store the kinds beside the sentences
(``failure_kinds``, ``run_failure_kinds``) and :func:`restore` joins them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: The kinds of failure, in the order a label names them when several failed:
#: ``--torchperf-strict``; a variant's outputs vs eager fp32; outputs or the metric vs the
#: baseline; a speedup vs eager below its baseline or ``min_speedup``; the GPU kernel time
#: beyond ``max_kernel_slowdown`` (``time-and-kernels``); a build above
#: ``max_compile_time``; a missing instruction count; a variant that could not be built or run.
KINDS = (
    "strict",
    "accuracy",
    "numerics",
    "metric",
    "speedup",
    "kernel time",
    "compile time",
    "instructions",
    "variant",
)


class Failure(str):
    """A failure's sentence, with its kind (one of :data:`KINDS`)."""

    kind: str

    def __new__(cls, kind: str, message: str) -> Failure:
        if kind not in KINDS:
            raise ValueError(f"unknown failure kind {kind!r}: one of {', '.join(KINDS)}")
        failure = super().__new__(cls, message)
        failure.kind = kind
        return failure

    def __reduce__(self) -> tuple[type[Failure], tuple[str, str]]:  # pickling keeps the kind
        return (Failure, (self.kind, str(self)))


def kinds_of(failures: Iterable[str]) -> list[str | None]:
    """Each failure's kind, None for a plain sentence (read from a file written before kinds
    were recorded)."""
    return [getattr(f, "kind", None) for f in failures]


def restore(messages: Sequence[str], kinds: Sequence[str | None] | None) -> list[str]:
    """Failures read back from a record: each sentence with its recorded kind (a plain sentence
    where the record has none, or an unknown one)."""
    kinds = list(kinds or ())
    restored: list[str] = []
    for index, message in enumerate(messages):
        kind = kinds[index] if index < len(kinds) else None
        restored.append(
            Failure(kind, message) if kind is not None and kind in KINDS else str(message)
        )
    return restored


def label_kinds(kinds: Iterable[str | None]) -> list[str]:
    """The kinds a label names: every one of :data:`KINDS` among ``kinds``, once each, in that
    order (none for sentences without a known kind)."""
    known = {k for k in kinds if k in KINDS}
    return [k for k in KINDS if k in known]
