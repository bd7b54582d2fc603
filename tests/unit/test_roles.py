"""A process's role (run/roles.py, and the roles the kinds offer: kinds/instructions/run.py,
kinds/ab/run.py): decided once from how the plugin set up its context
(run/kinds.py:role_of); the pipeline asks it whether to judge, whether to retry an unfit pass,
and what the baseline is."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_torchperf.kinds.ab.run import ABController, ABSide
from pytest_torchperf.kinds.ab.run_data import ABState
from pytest_torchperf.kinds.instructions.run import Counting
from pytest_torchperf.kinds.instructions.run_counting import CountState
from pytest_torchperf.run.kinds import role_of
from pytest_torchperf.run.roles import Disabled, FreshProcess, Timing
from pytest_torchperf.store.sessions import Session


def _ctx(**set_up: object) -> SimpleNamespace:
    settings = SimpleNamespace(disable=set_up.pop("disable", False), compare=True)
    states: dict[type, object] = {
        ABState: ABState(turns=set_up.pop("turns", None), data=set_up.pop("ab_data", None))
    }
    ctx = SimpleNamespace(settings=settings, **{"child_sink": None, **set_up})
    ctx.state = lambda kind_state: states.setdefault(kind_state, kind_state())
    return ctx


def test_each_set_up_gets_its_role_and_the_first_match_wins() -> None:
    assert isinstance(role_of(_ctx()), Timing)
    assert isinstance(role_of(_ctx(disable=True, child_sink=object())), Disabled)
    # A counting child also has a sink: it counts.
    counting = _ctx(child_sink=object())
    counting.state(CountState).folder = "dumps"
    assert isinstance(role_of(counting), Counting)
    assert isinstance(role_of(_ctx(ab_data=object())), ABController)
    # An A/B side also has a sink: it takes turns.
    assert isinstance(role_of(_ctx(turns=object(), child_sink=object())), ABSide)
    assert isinstance(role_of(_ctx(child_sink=object())), FreshProcess)


def test_only_the_controllers_judge_and_only_a_fresh_process_retries_for_someone_else() -> None:
    ctx = _ctx()
    assert Timing().judges(ctx) is True  # as the run's --torchperf-compare says
    ctx.settings.compare = False
    assert Timing().judges(ctx) is False
    assert ABController().judges(ctx) is True  # an A/B run always compares its two sides
    assert FreshProcess().judges(_ctx()) is False and ABSide().judges(_ctx()) is False
    assert FreshProcess.retries_unfit and not ABSide.retries_unfit and not Timing.retries_unfit


def test_the_ab_controller_judges_against_side_a_measured_now() -> None:
    paired = SimpleNamespace(
        a_sessions=[Session(statistic=1.0)], pairs=[], one_sided="B", speedups=[(1.5, 1.25)]
    )
    ctx = _ctx(ab_data=SimpleNamespace(measured={("t.py::a", "m"): paired}, against="main"))
    controller = ABController()
    assert controller.baseline(ctx, "t.py::a", "m", "env") == [Session(statistic=1.0)]
    assert controller.baseline(ctx, "t.py::b", "m", "env") == []
    # The ab kind's run part puts the pairs on the record (its own section).
    from pytest_torchperf.judge.inputs import Candidate
    from pytest_torchperf.kinds.ab.judge import PairsData
    from pytest_torchperf.run.kinds import run_part

    record_fields = run_part("ab").record_fields
    fields = record_fields(ctx, SimpleNamespace(nodeid="t.py::a", name="m"))  # type: ignore[arg-type]
    assert fields["ab"]["one_sided"] == "B" and fields["ab"]["against"] == "main"
    assert record_fields(ctx, SimpleNamespace(nodeid="t.py::b", name="m")) == {}  # type: ignore[arg-type]
    # The engine reads the pairs from the record, as a replay of the results file does.
    candidate = Candidate.from_record(object(), {"name": "m", **fields})  # type: ignore[arg-type]
    data = PairsData.of(candidate)
    assert data.one_sided == "B" and data.speedups == [(1.5, 1.25)]
