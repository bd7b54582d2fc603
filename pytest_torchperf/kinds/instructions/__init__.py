"""The ``instructions`` measurement kind (``--torchperf-instructions``): instructions per call
counted under Valgrind's callgrind in child processes side by side, against the latest count
stored under the instruction environment.

- measuring: :mod:`.measure_callgrind` (running a call under callgrind),
  :mod:`.measure_callgrind_output` (reading its output);
- judging: :mod:`.judge_counts` (deciding and wording), :mod:`.judge` (the kind);
- reporting: :mod:`.report` (the count's column in a run's tables, ``torchperf show``'s and
  ``torchperf history``'s figures of an instruction environment);
- running: :mod:`.run_counting` (counting in a child, reading the counts in the controller),
  :mod:`.run_job_split` (how the perf tests are split over counting processes), :mod:`.run`
  (what it keeps, when it is chosen);
- options: :mod:`.options` (a measurement's: counted or not, the limit);
- pytest: :mod:`.plugin_options` (its options), :mod:`.plugin_runs` (the counting children),
  :mod:`.plugin` (their schedule).

The ``time-or-instructions`` kind (:mod:`pytest_torchperf.kinds.fallback`) counts with the same
children."""

from __future__ import annotations

from pytest_torchperf.kinds.spec import KindSpec

SPEC = KindSpec(
    name="instructions",
    package=__name__,
    summary="instructions per call under Valgrind against the latest stored count",
    record_keys=("instructions", "uncounted"),
    session_keys=("counted_with",),
    result_keys=("instructions", "instructions_vs_eager"),
    gate_keys=("max_instruction_increase",),
    figures=(("instructions", "instructions"),),
    label="instructions",
    parts=("options", "judge", "report", "run", "plugin"),
)
