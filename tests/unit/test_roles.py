"""A process's role (run/roles.py): decided once from how the plugin set up its context; the
pipeline asks it whether to judge, whether to retry an unfit pass, and what the baseline is."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_torchperf.run.roles import (
    ABController,
    ABSide,
    Counting,
    Disabled,
    FreshProcess,
    Timing,
    role_of,
)


def _ctx(**set_up: object) -> SimpleNamespace:
    settings = SimpleNamespace(disable=set_up.pop("disable", False), compare=True)
    base = {"counting": None, "ab_data": None, "turns": None, "child_sink": None}
    return SimpleNamespace(settings=settings, **{**base, **set_up})


def test_each_set_up_gets_its_role_and_the_first_match_wins() -> None:
    assert isinstance(role_of(_ctx()), Timing)
    assert isinstance(role_of(_ctx(disable=True, child_sink=object())), Disabled)
    # A counting child also has a sink: it counts.
    assert isinstance(role_of(_ctx(counting="dumps", child_sink=object())), Counting)
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
        a_sessions=[{"statistic": 1.0}], pairs=[], one_sided="B", speedups=[(1.5, 1.25)]
    )
    ctx = _ctx(ab_data=SimpleNamespace(measured={("t.py::a", "m"): paired}, against="main"))
    controller = ABController()
    assert controller.baseline(ctx, "t.py::a", "m", "env") == [{"statistic": 1.0}]
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
