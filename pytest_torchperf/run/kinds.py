"""Which kind a measurement is, and the gate it is judged under, decided here once
(:func:`kind_name`, :func:`gate_of`) by asking the kinds' run parts
(:mod:`pytest_torchperf.run.kind_run`) in the registry's order (:mod:`pytest_torchperf.kinds`);
the pipeline asks the kind's run part and never the run mode. Its judging part is
:mod:`pytest_torchperf.judge.kinds`. Pytest-free.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from pytest_torchperf.core.types import JSONObject
from pytest_torchperf.judge.inputs import Gate
from pytest_torchperf.kinds import gate_keys, part, spec_named, specs
from pytest_torchperf.run.kind_run import Keeping, KindRun, Unsaved
from pytest_torchperf.run.roles import Disabled, FreshProcess, Role, Timing

if TYPE_CHECKING:
    from pytest_torchperf.options.measure_options import MeasureOptions
    from pytest_torchperf.run.context import RunContext
    from pytest_torchperf.run.state import Measured


def role_of(ctx: RunContext) -> Role:
    """The role of this process, from how the plugin set up its context: disabled, a role a
    measurement kind offers (a counting child, an A/B side or controller), a fresh process
    writing for its controller, or plain timing."""
    if ctx.settings.disable:
        return Disabled()
    for spec in specs():
        role = run_part(spec.name).role(ctx)
        if role is not None:
            return role
    if ctx.child_sink is not None:
        return FreshProcess()
    return Timing()


def resolve_options(
    ctx: RunContext,
    call: Mapping[str, object],
    marker: Mapping[str, object],
    where: str,
    refused: Collection[str] = (),
) -> tuple[MeasureOptions, str | None]:
    """A measurement's options: its call's keywords over its marker's, the command line's and
    the ini file's (each layer validated; ``refused``: options the call may not set), then each
    kind's adjustment for the run it is in (:attr:`KindRun.adjust_options`: an A/B run's
    defaults). Returns the options and the measurement's explicit name."""
    from pytest_torchperf.options.measure_options import parse_layer, resolve

    call_layer = parse_layer(call, f"{where}: torchperf(...) call", refused)
    marker_layer = parse_layer(marker, f"{where}: @pytest.mark.torchperf")
    options = resolve(call_layer, marker_layer, ctx.settings.cli, ctx.settings.ini)
    ctx.check_min_time(
        options.min_time,
        (
            (call_layer, f"min_time= of the torchperf(...) call in {where}"),
            (marker_layer, f"@pytest.mark.torchperf(min_time=...) of {where}"),
            (ctx.settings.cli, "--torchperf-min-time"),
            (ctx.settings.ini, "ini torchperf_min_time"),
        ),
    )
    layers = (call_layer, marker_layer, ctx.settings.cli, ctx.settings.ini)
    for spec in specs():
        options = run_part(spec.name).adjust_options(ctx, options, layers)
    return options, call_layer.get("name") or marker_layer.get("name")


def run_part(name: str) -> KindRun:
    """The run part of the kind called ``name``."""
    module = part(spec_named(name), "run")
    if module is None:
        raise ValueError(f"measurement kind {name!r} has no run part: it cannot be measured")
    run: KindRun = module.RUN
    return run


def explains_slowdown(basis: str, variant: str) -> bool:
    """Whether a failing verdict judged on ``basis`` (the name of the kind whose figure decided
    it) is explained by a profile of ``variant``'s call: that kind's run part says; a basis no
    kind here has is not."""
    return any(run_part(s.name).explains_slowdown(variant) for s in specs() if s.name == basis)


def kind_name(ctx: RunContext, options: MeasureOptions, device: str, gate: bool = True) -> str:
    """The kind a measurement is judged as: the first in the registry's order whose run part
    chooses it, from the run's settings, the measurement's options and its device."""
    for spec in specs():
        if run_part(spec.name).chosen(ctx, options, device, gate):
            return spec.name
    raise ValueError("no measurement kind chose this measurement (the time kind chooses any)")


def keeping_of(ctx: RunContext, options: MeasureOptions, device: str, gate: bool) -> Keeping:
    """What a measurement keeps: its kind's."""
    return run_part(kind_name(ctx, options, device, gate)).keeping


def run_refusal(ctx: RunContext, m: Measured) -> Unsaved | None:
    """Why the run a measurement was taken in must not save it, whatever its kind (the kinds'
    :attr:`KindRun.refuses_save`), or None."""
    kind = kind_name(ctx, m.options, m.measurer.device, m.gate)
    for spec in specs():
        refused = run_part(spec.name).refuses_save(ctx, m, kind)
        if refused is not None:
            return refused
    return None


def gate_of(ctx: RunContext, options: MeasureOptions, device: str) -> Gate:
    """The gate a measurement runs under (stored with its session for ``torchperf compare``)."""
    return Gate(
        max_slowdown=options.max_slowdown,
        min_cpu_share=options.min_cpu_share,
        max_spread=options.max_spread,
        max_neighbour_load=options.max_neighbour_load,
        max_machine_slowdown=options.max_machine_slowdown,
        min_gpu_clock=options.min_gpu_clock,
        max_widening=options.max_widening,
        strict=options.strict,
        strict_by=ctx.settings.strict_by,
        ignore_counters=tuple(options.ignore_counters),
        confirm=ctx.settings.confirm if ctx.fresh_runs else "same",
        saving=ctx.settings.save,
        kind=kind_name(ctx, options, device),
        limits=tuple((key, options.value(key)) for key in gate_keys()),
        facts=tuple(
            (k, v) for spec in specs() for k, v in run_part(spec.name).gate_fields(ctx).items()
        ),
    )


def check_measurable(
    ctx: RunContext, options: MeasureOptions, device: str, label: str, gate: bool = True
) -> None:
    """Skip a measurement its kind cannot take on ``device`` (an instruction count on a GPU),
    saying why (:attr:`KindRun.unmeasurable`)."""
    from pytest_torchperf.run.state import MeasurementSkipped

    why = run_part(kind_name(ctx, options, "cpu", gate)).unmeasurable(device, label)
    if why:
        raise MeasurementSkipped(why)


def kind_fields(ctx: RunContext, m: Measured) -> tuple[JSONObject, JSONObject]:
    """The measurement kind's own keys of the measurement's record, and of its session."""
    fields = dict(
        run_part(kind_name(ctx, m.options, m.measurer.device, m.gate)).record_fields(ctx, m)
    )
    session = fields.pop("session", None)
    return fields, dict(session) if isinstance(session, dict) else {}


def measure_beside(ctx: RunContext, m: Measured) -> None:
    """What the measurement's kind measures beside its first timed pass, into ``m.beside``."""
    beside = run_part(kind_name(ctx, m.options, m.measurer.device, m.gate)).beside
    if beside is not None:
        m.beside = beside(m.measurer, m.first)
