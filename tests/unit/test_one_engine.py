"""Verdicts come from one comparison engine (pytest_torchperf.judge.compare), whether a live run or
``torchperf compare`` asks: no other module calls the decision, drift or counter checks. Static,
like the import-graph test, so a second comparison path fails here as soon as it is written."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_torchperf"
#: Function -> the modules allowed to call it. Cross-machine counters (another environment's
#: baseline, plugin-only) reuse the counter diff. Each measurement kind's decider (time,
#: instructions, A/B pairs, GPU kernel time) is called by its kind's judge part only
#: (kinds/<kind>/judge.py), and only the judge layer (and the kinds' judge parts) builds a Verdict.
ALLOWED = {
    # compare calls the kind's judge(); the time kind (and the kinds built on it) the timing one
    "judge": {"kinds/time/judge.py", "kinds/fallback/judge.py", "judge/compare.py"},
    "judge_instructions": {"kinds/instructions/judge.py"},
    "judge_ab": {"kinds/ab/judge.py"},
    "judge_ab_speedup": {"kinds/ab/judge.py"},
    "judge_kernels": {"kinds/kernels/judge.py"},
    # Deciding apart from wording: each decider is called by its kind's judge_* only.
    "decide_ab": {"kinds/ab/judge_pairs.py"},
    "decide_ab_speedup": {"kinds/ab/judge_pairs.py"},
    # ... and, before the test loop, to pick the counts that are counted again in a fresh
    # process (no verdict: the engine judges both counts later).
    "decide_instructions": {
        "kinds/instructions/judge_counts.py",
        "kinds/instructions/run_recount.py",
    },
    "Verdict": {"judge/verdict.py", "kinds/instructions/judge.py", "kinds/ab/judge.py"},
    "decide": {"judge/verdict.py"},
    "drift_checks": {"judge/compare.py"},
    "speedup_check": {"judge/drift.py"},
    # torchperf bisect tells a revision's counters from GOOD's to pick the next revision, and
    # accept a run of other code from the stored sessions' (judge/replay.py: other_code): no
    # verdict of a measurement either.
    "diff_counters": {
        "judge/compare.py",
        "judge/counter_diff.py",
        "judge/replay.py",
        "run/explain.py",
        "run/bisect_mode.py",
    },
}


def test_only_the_engine_calls_the_checks() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else (func.attr if isinstance(func, ast.Attribute) else None)
                )
                if name in ALLOWED and where not in ALLOWED[name]:
                    offenders.append(f"{where}:{node.lineno} calls {name}()")
    assert offenders == []
