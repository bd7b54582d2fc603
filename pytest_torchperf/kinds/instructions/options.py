"""The ``instructions`` kind's options of a measurement (shared by ``time-or-instructions``):
whether it is counted at all, and the limit its count is judged at. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_torchperf.options.option_spec import option
from pytest_torchperf.options.values import parse_bool, parse_fraction

#: The default ``max_instruction_increase``: counts repeat within 0.1 %, so 1 % is far above
#: their noise (a small target's limit is widened to its absolute noise floor besides).
DEFAULT_MAX_INCREASE = 0.01


@dataclass(frozen=True)
class CountOptions:
    """A measurement's instruction-count options."""

    instructions: bool = option(
        True,
        parse_bool,
        "In a --torchperf-instructions run, count this test's instructions (default "
        "true; false times it instead)",
        cli=False,
    )
    max_instruction_increase: float = option(
        DEFAULT_MAX_INCREASE,
        parse_fraction,
        "Instruction-count runs: growth of instructions per call beyond which a test "
        "fails, e.g. 1% (default)",
    )


SECTION = CountOptions


@dataclass(frozen=True)
class CountSettings:
    """An instruction-count run's settings (``settings.of(CountSettings)``)."""

    #: ``--torchperf-instructions``: CPU measurements are gated on instructions per call
    #: counted under Valgrind (time is reported, not gated).
    instructions: bool = False
    #: ``--torchperf-fallback instructions``: CPU measurements are timed and gated on time as
    #: usual, and also counted under Valgrind; the count is stored beside the timing and judges
    #: a measurement whose timing verdict is inconclusive ("" when off).
    fallback: str = ""
    #: ``--torchperf-instruction-jobs``: counting processes run side by side under Valgrind
    #: (0 = auto: one per CPU, at most 4, fewer when memory is short).
    jobs: int = 0

    @property
    def counts(self) -> bool:
        """This run counts its CPU perf tests under Valgrind before its own test loop."""
        return self.instructions or self.fallback == "instructions"

    @property
    def active(self) -> bool:
        return self.counts

    def describe(self, mode: str) -> str | None:
        """The run mode for headers."""
        if self.fallback:
            return f"{mode}, time (instruction counts where timing cannot decide)"
        return f"{mode}, instruction counts" if self.instructions else None
