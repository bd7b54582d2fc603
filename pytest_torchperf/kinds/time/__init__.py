"""The ``time`` measurement kind: the p25 of timed blocks against the stored sessions'
timings, within a limit their noise widens. Chosen when no other kind is. Its judging is
:mod:`.judge`; what it keeps, :mod:`.run` (the base every kind's keeping builds on is
:class:`pytest_torchperf.run.kinds.Keeping`). Timing itself is shared by every timed kind and
lives in the layers (``measure/sampling.py``, ``judge/verdict.py``)."""

from __future__ import annotations

from pytest_torchperf.kinds.spec import KindSpec

SPEC = KindSpec(
    name="time",
    package=__name__,
    summary="timed blocks: the p25 of a pass against the median of the stored sessions' p25s",
    figures=(("time", "time"),),
    parts=("judge", "run"),
)
