"""The end of a compared test whose body ran to its end: the measurements its baseline holds
that it no longer took (renamed or removed from it). A plain "no baseline" verdict of the test
is reworded as one of them renamed; where none is, the test warns that they are no longer gated.
Said then, not when a measurement is judged: a test may take its stored measurements after its
new one. Only in a compare that does not save: a save (under ``-W error`` a warning would fail
the test and store nothing) or a plain run reads no baseline to judge against. Pytest-free.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from pytest_torchperf.judge.compare import forget_command, renamed_message
from pytest_torchperf.judge.failures import Failure
from pytest_torchperf.judge.kinds import judging
from pytest_torchperf.judge.outcome import Outcome
from pytest_torchperf.run.context import RunContext
from pytest_torchperf.run.kinds import kind_name
from pytest_torchperf.run.result import Result
from pytest_torchperf.run.state import TestState
from pytest_torchperf.store.baselines import shown
from pytest_torchperf.variants.registry import variant_of


def say_left_behind(ctx: RunContext, state: TestState) -> None:
    """Reword each plain "no baseline" verdict of the test (and the strict failure quoting it)
    where its stored measurements include some it did not take this run
    (:func:`~pytest_torchperf.judge.compare.renamed_message`); where none was reworded, warn
    of those left behind."""
    settings = ctx.settings
    if settings.save or not settings.compare or settings.child:
        return
    taken = {r.name for r in state.results} | state.names | set(state.skipped)
    left: dict[str, list[str]] = {}  # by environment: one file read each
    reworded: set[str] = set()
    for result in state.results:
        env_id = result.environment_id
        if not env_id or not judging(kind_name(ctx, result.options, result.device)).needs_baseline:
            continue  # an A/B run keeps no baseline; an untimed one has no environment
        if env_id not in left:
            left[env_id] = _untaken(ctx, env_id, result.nodeid, taken)
        if left[env_id] and _renamed(ctx, state, result):
            _reword(ctx, result, left[env_id])
            reworded.add(env_id)
    stale = sorted({n for env_id, names in left.items() if env_id not in reworded for n in names})
    if stale:
        nodeid = state.results[0].nodeid
        many = len(stale) > 1
        forget = forget_command(
            shlex.quote(nodeid), shown(ctx.store.root), " ".join(map(shlex.quote, stale))
        )
        state.warnings.append(
            f"{nodeid}: its baseline still holds {', '.join(stale)}, which the test no longer "
            f"measures (removed or renamed): {'they are' if many else 'it is'} no longer gated; "
            f"{forget} drops {'them' if many else 'it'}"
        )


def _untaken(ctx: RunContext, env_id: str, nodeid: str, taken: set[str]) -> list[str]:
    """The measurements stored for test ``nodeid`` in ``env_id`` that it did not take, but for
    the variants ``--torchperf-variants`` left out of this run."""
    chosen = ctx.settings.variant_filter
    stored = ctx.store.names_of(env_id, nodeid)
    return sorted(
        name for name in set(stored) - taken if chosen is None or variant_of(name) in chosen
    )


def _renamed(ctx: RunContext, state: TestState, result: Result) -> bool:
    """``result`` has no baseline for a reason a rename explains: a plain "new" (not another
    environment's baseline, which its message names, nor a test renamed as a whole: its name
    stored under a test its module no longer defines)."""
    verdict, env_id = result.verdict, result.environment_id
    if verdict is None or verdict.outcome is not Outcome.NEW or verdict.new_reason or not env_id:
        return False
    holders = ctx.store.tests_with(env_id, result.nodeid, result.name)
    return not any(not state.exists(test) for test in holders)


def _reword(ctx: RunContext, result: Result, olds: list[str]) -> None:
    """``result``'s verdict as one of ``olds`` renamed, and its strict failure with it."""
    assert result.verdict is not None
    before = result.verdict.message
    message = renamed_message(
        result.name,
        result.nodeid,
        olds,
        shown(ctx.store.root),
        result.save_command,
        scoped=ctx.settings.ids_from_here,
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
