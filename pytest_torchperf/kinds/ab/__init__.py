"""The ``ab`` measurement kind (``--torchperf-ab REV``, ``--torchperf-ab-python PY``): two sides
(A: a revision or interpreter, B: the working tree) measured now in process pairs whose timed
blocks take turns; side B's paired interval against the limit is the verdict.

- measuring: :mod:`.measure_turns` (a side's end of the turn protocol);
- judging: :mod:`.judge_pairs` (the paired interval, deciding and wording), :mod:`.judge`;
- reporting: :mod:`.report` (side A as the tables' baseline, the change's interval);
- running: :mod:`.run_sides` (the sides), :mod:`.run_pairs` (one process pair taking turns),
  :mod:`.run_data` (the turn scheduler, the sides' data), :mod:`.run_roles` (a side's child,
  the controller: its variants from the sides' data), :mod:`.run` (what it keeps, when it is
  chosen);
- pytest: :mod:`.plugin_runs` (the controller), :mod:`.plugin` (a side's child, their
  schedule)."""

from __future__ import annotations

from pytest_torchperf.kinds.spec import KindSpec

SPEC = KindSpec(
    name="ab",
    package=__name__,
    summary="side B's paired interval over process pairs against side A, both measured now",
    record_keys=("ab",),
    result_keys=("ab",),
    gate_facts=(("ab", ""),),
    figures=(("ab", "A/B pairs"),),
    parts=("options", "judge", "report", "run", "plugin"),
)
