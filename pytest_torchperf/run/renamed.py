"""The end of a comparing test: a measurement with no baseline, in a test whose baseline holds
measurements the test did not take, is most likely one of them renamed. Said then, not when the
measurement is judged: a test may take its stored measurements after its new one. Pytest-free.
"""

from __future__ import annotations

from dataclasses import replace

from pytest_torchperf.judge.compare import renamed_message
from pytest_torchperf.judge.decision import Outcome
from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.judge.kinds import judging
from pytest_torchperf.run.context import RunContext
from pytest_torchperf.run.kinds import kind_name
from pytest_torchperf.run.result import Result
from pytest_torchperf.run.state import TestState
from pytest_torchperf.store.baselines import shown


def hint_renamed(ctx: RunContext, state: TestState) -> None:
    """Reword each plain "no baseline" verdict of a test whose body ran to its end (and the
    strict failure quoting it) where the test's stored measurements include some it did not
    take this run (:func:`~pytest_torchperf.judge.compare.renamed_message`)."""
    if ctx.settings.save:
        return  # a save starts the new measurement's baseline; its coverage line says so
    taken = {r.name for r in state.results} | state.names | set(state.skipped)
    for result in state.results:
        olds = _left_behind(ctx, result, taken)
        if olds and result.verdict is not None:
            before = result.verdict.message
            message = renamed_message(
                result.name, result.nodeid, olds, shown(ctx.store.root), result.save_command
            )
            result.verdict = replace(result.verdict, message=message)
            # Under --torchperf-strict the test fails with the verdict's words; keep its suffix.
            result.failures = [
                Failure("strict", message + failure[len(before) :])
                if isinstance(failure, Failure)
                and failure.category == "strict"
                and failure.startswith(before)
                else failure
                for failure in result.failures
            ]


def _left_behind(ctx: RunContext, result: Result, taken: set[str]) -> list[str]:
    """The stored measurements of ``result``'s test it did not take, where ``result`` has no
    baseline for a reason a rename explains (not another environment's, a missing storage
    folder or a test renamed as a whole, which their own messages name)."""
    verdict, env_id = result.verdict, result.environment_id
    if verdict is None or verdict.outcome is not Outcome.NEW or verdict.new_reason or not env_id:
        return []
    if not judging(kind_name(ctx, result.options, result.device)).needs_baseline:
        return []
    if ctx.store.tests_with(env_id, result.nodeid, result.name):  # a renamed test's, said so
        return []
    return sorted(set(ctx.store.names_of(env_id, result.nodeid)) - taken)
