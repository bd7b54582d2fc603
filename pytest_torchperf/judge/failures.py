"""A failure beyond the timing verdict and the counters, with its category decided where it is
found. Pure.

A failure is read as its sentence everywhere (the test's failure message, every report), so
:class:`Failure` is that sentence (a ``str``) carrying its :attr:`Failure.category`. Labels
(:func:`pytest_torchperf.judge.labels.outcome_label`) are made from the categories, never from
the words: rewording a sentence cannot change a label. Records store the categories beside the
sentences (under the file keys ``failure_kinds`` and ``run_failure_kinds``, named before
"kind" came to mean only a measurement kind) and :func:`restore` joins them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: The categories of failure, in the order a label names them when several failed:
#: ``--torchperf-strict``; a variant's outputs vs eager fp32; outputs or the metric vs the
#: baseline; a speedup vs eager below its baseline or ``min_speedup``; the GPU kernel time
#: beyond ``max_kernel_slowdown`` (``time-and-kernels``); a build above
#: ``max_compile_time``; a missing instruction count; a variant that could not be built or run.
CATEGORIES = (
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
    """A failure's sentence, with its category (one of :data:`CATEGORIES`)."""

    category: str

    def __new__(cls, category: str, message: str) -> Failure:
        if category not in CATEGORIES:
            raise ValueError(
                f"unknown failure category {category!r}: one of {', '.join(CATEGORIES)}"
            )
        failure = super().__new__(cls, message)
        failure.category = category
        return failure

    @property
    def kind(self) -> str:
        """:attr:`category`, under the name earlier versions gave it."""
        return self.category

    def __reduce__(self) -> tuple[type[Failure], tuple[str, str]]:  # pickling keeps the category
        return (Failure, (self.category, str(self)))


def categories_of(failures: Iterable[str]) -> list[str | None]:
    """Each failure's category, None for a plain sentence (read from a file written before
    categories were recorded)."""
    return [getattr(f, "category", None) for f in failures]


def restore(messages: Sequence[str], categories: Sequence[str | None] | None) -> list[str]:
    """Failures read back from a record: each sentence with its recorded category (a plain
    sentence where the record has none, or an unknown one)."""
    categories = list(categories or ())
    restored: list[str] = []
    for index, message in enumerate(messages):
        category = categories[index] if index < len(categories) else None
        restored.append(
            Failure(category, message)
            if category is not None and category in CATEGORIES
            else str(message)
        )
    return restored


def label_categories(categories: Iterable[str | None]) -> list[str]:
    """The categories a label names: every one of :data:`CATEGORIES` among ``categories``, once
    each, in that order (none for sentences without a known category)."""
    known = {c for c in categories if c in CATEGORIES}
    return [c for c in CATEGORIES if c in known]
