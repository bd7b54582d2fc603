"""Options of a measurement: the option table, validation and precedence (the value parsers are in
:mod:`.values`).

Pure module (no pytest, no torch). Every user-settable option of a measurement is described once
in ``OPTIONS``; the pytest layer feeds it the values from each layer and gets back one resolved
:class:`MeasureOptions`. Precedence, highest first: keyword of the ``torchperf(...)`` call,
keyword of the ``@pytest.mark.torchperf`` marker, command-line option, ini key, built-in default.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_torchperf.core.errors import (
    OptionError,  # defined apart so that variant_options can raise it too
)
from pytest_torchperf.core.types import UserValue
from pytest_torchperf.core.units import format_time
from pytest_torchperf.kinds import parts
from pytest_torchperf.options.option_spec import OptionSpec, option
from pytest_torchperf.options.values import (
    parse_bool,
    parse_counter_names,
    parse_duration,
    parse_factor,
    parse_fraction,
    parse_label,
    parse_positive_int,
    parse_seed,
    parse_share,
)
from pytest_torchperf.options.variant_options import (
    VariantSpec,
    parse_accuracy,
    parse_data,
    parse_metric,
    parse_min_speedup,
    parse_variants,
)

if TYPE_CHECKING:  # typeshed's name for "an instance of some dataclass" (no runtime module)
    from _typeshed import DataclassInstance

# --------------------------------------------------------------------------------------------------
# The option table.
# --------------------------------------------------------------------------------------------------


#: The kinds' option dataclasses (:attr:`MeasureOptions.sections`), from their ``options`` parts'
#: ``SECTION`` (the fallback kind has none of its own: it counts with the instruction count's).
SECTIONS: tuple[type[DataclassInstance], ...] = tuple(
    module.SECTION for module in parts("options") if getattr(module, "SECTION", None) is not None
)

S = TypeVar("S")


@dataclass(frozen=True)
class MeasureOptions:
    """Resolved options of one measurement (one ``torchperf(...)`` call or one whole-test measurement)."""

    max_slowdown: float = option(
        0.10, parse_fraction, "Slowdown beyond which a test fails, e.g. 10% or 0.1 (default 10%)"
    )
    #: Seconds of timed blocks to collect per measurement (0.25 s instead of 1 s roughly doubled
    #: false alarms on a shared 2-vCPU VM; see docs/reliability.md).
    min_time: float = option(
        1.0,
        parse_duration,
        "Seconds of timed samples per measurement, e.g. 1s or 500ms (default 1s)",
    )
    #: Seconds of untimed warm-up calls (at least 3 calls are always made).
    warmup: float = option(
        0.2, parse_duration, "Seconds of untimed warm-up calls before timing (default 0.2s)"
    )
    #: Intra-op threads during timing (``torch.set_num_threads``); 1 is the stable choice on CI.
    threads: int = option(1, parse_positive_int, "Intra-op threads while timing (default 1)")
    strict: bool = option(
        False,
        parse_bool,
        "Fail what would only warn: inconclusive verdicts (noisy machine), measurements "
        "with no baseline (a misspelt storage folder, baselines never committed), and a "
        "compare that judged timing for under half its measurements",
    )
    #: Contention guard: below this process CPU share (CPU time / wall time) a CPU measurement is
    #: re-measured, then inconclusive. 0 disables the guard.
    min_cpu_share: float = option(
        0.9,
        parse_share,
        "Contention guard: CPU measurements with a lower process "
        "CPU share are inconclusive, e.g. 0.9 (default; 0 disables)",
    )
    #: Spread guard: above this IQR/median a measurement is re-measured, then inconclusive.
    max_spread: float = option(
        0.25,
        parse_fraction,
        "Spread guard: measurements with a larger IQR/median are inconclusive, e.g. 25% (default)",
    )
    #: Machine guard: a CPU pass whose calibration kernel ran this much slower than when the
    #: baseline was saved is re-measured, then inconclusive (and is not saved).
    max_machine_slowdown: float = option(
        0.25,
        parse_fraction,
        "Machine guard: CPU measurements during "
        "which the calibration kernel ran more than this slower than when the baseline "
        "was saved are inconclusive and not saved, e.g. 25% (default)",
    )
    #: GPU clock guard: a CUDA pass whose SM clock fell below this share of its maximum (or that
    #: the driver throttled for heat, a power brake or a hardware slowdown) is re-measured,
    #: then inconclusive (needs nvidia-ml-py). 0 disables it.
    min_gpu_clock: float = option(
        0.75,
        parse_share,
        "GPU clock guard: CUDA measurements while the SM clock was below this share of its "
        "maximum (or throttled for heat or a power brake) are inconclusive, e.g. 0.75 "
        "(default; 0 disables; needs nvidia-ml-py)",
    )
    #: A timing pass within a limit the stored sessions' process noise widened beyond this many
    #: times ``max_slowdown`` is inconclusive, and a save whose sessions imply such a limit
    #: fails: that limit gates nothing. 0 (``off``) disables the bound.
    max_widening: float = option(
        3.0,
        parse_factor,
        "Widest limit, as a multiple of max_slowdown, that the stored sessions' process "
        "noise may widen it to: beyond, timing is not judged and a save fails, e.g. 3x "
        "(default; off disables)",
    )
    #: Neighbour guard: above this share of the other CPUs kept busy by other processes while
    #: timing, a CPU measurement is re-measured, then inconclusive. 1 (100%) disables it.
    max_neighbour_load: float = option(
        0.5,
        parse_share,
        "Neighbour guard: CPU measurements while other "
        "processes kept more of the other CPUs busy are inconclusive, e.g. 50% "
        "(default; 100% disables)",
    )
    #: Time ``nn.Module`` targets in ``eval()`` mode under ``torch.no_grad()`` (restored afterwards).
    inference: bool = option(
        True,
        parse_bool,
        "Time nn.Module targets in eval() mode under no_grad (default true)",
        cli=False,
    )
    check_finite: bool = option(
        True, parse_bool, "Fail when outputs contain NaN or inf (default true)", cli=False
    )
    group: str | None = option(None, parse_label, "Group label shown in the summary", cli=False)
    counters: bool = option(
        True,
        parse_bool,
        "Record FLOPs/op/parameter/memory counters and fail when they change (default true)",
        cli=False,
    )
    ignore_counters: tuple[str, ...] = option(
        (),
        parse_counter_names,
        "Counters not gated, comma-separated: flops, ops, params, memory, graphs",
    )
    #: Seed for torch/random/numpy before each perf test (its fixtures included), so unseeded
    #: models and inputs are the same in every run and their numerics can be compared;
    #: ``SEED_OFF`` (-1, written ``off``) disables it.
    seed: int = option(
        0,
        parse_seed,
        "Seed torch, random and numpy before each perf test so "
        "outputs are comparable across runs (default 0; off disables)",
    )
    #: Variants to measure side by side, each with its settings (default: eager only).
    variants: tuple[VariantSpec, ...] = option(
        (("eager", ()),),
        parse_variants,
        "Variants to measure side by side: eager, compiled, fused, amp, int8",
        cli=False,
    )
    #: Required speedup vs eager per variant, e.g. ``(("compiled", 1.2),)``.
    min_speedup: tuple[tuple[str, float], ...] = option(
        (), parse_min_speedup, "Required speedup vs eager per variant", cli=False
    )
    #: Accuracy tolerance overrides per variant (defaults: ``variants.registry.VARIANTS``).
    accuracy: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = option(
        (), parse_accuracy, "Accuracy tolerances per variant", cli=False
    )
    max_compile_time: float = option(
        180.0,
        parse_duration,
        "Fail when building a variant (compile, "
        "quantize, first call) takes longer, e.g. 60s (default 180s)",
    )
    #: ``fn(outputs, targets) -> float`` computed per variant on ``data`` and gated across runs.
    metric: Callable[..., Any] | None = option(
        None, parse_metric, "fn(outputs, targets) -> float gated per variant", cli=False
    )
    data: tuple[UserValue, UserValue] | None = option(
        None, parse_data, "(inputs, targets) for metric", cli=False
    )
    #: The measurement kinds' own options (``kinds/<kind>/options.py``: each kind's ``SECTION``
    #: dataclass), resolved like the rest; read with :meth:`of`.
    sections: tuple[DataclassInstance, ...] = field(
        default_factory=lambda: tuple(t() for t in SECTIONS)
    )

    def of(self, section: type[S]) -> S:
        """This measurement's options of one kind (``options.of(CountOptions)``)."""
        found = next((s for s in self.sections if isinstance(s, section)), None)
        return found if found is not None else section()

    def __getattr__(self, name: str) -> Any:
        # A kind's own option read as an attribute (``options.max_kernel_slowdown``), as before
        # the kinds owned them; only reached for names that are not fields.
        if name.startswith("__") or name == "sections":
            raise AttributeError(name)
        try:
            return self.value(name)
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r}"
            ) from None

    def value(self, name: str) -> Any:
        """One option's value by name, whether shared or a kind's own."""
        if name in _SHARED_FIELDS:
            return getattr(self, name)
        for section in self.sections:
            if name in {f.name for f in fields(section)}:
                return getattr(section, name)
        raise KeyError(name)

    def variant_names(self) -> tuple[str, ...]:
        """The variant names, in the order given."""
        return tuple(name for name, _ in self.variants)

    def variant_settings(self, name: str) -> dict[str, object]:
        """Settings of one variant (empty when none were given)."""
        return dict(next((settings for n, settings in self.variants if n == name), ()))

    def accuracy_limits(
        self, variant: str, amp_dtype: str | None = None, device: str = "cpu"
    ) -> dict[str, float]:
        """The accuracy limits a variant (or eager's fingerprint) is held to: the variant's
        defaults for this dtype and device, then this measurement's ``accuracy={...}``. The one
        place a measurement's limits are computed."""
        from pytest_torchperf.variants.registry import tolerances

        overrides = dict(dict(self.accuracy).get(variant, ()))
        return tolerances(variant, overrides, amp_dtype, device=device)


#: The option table: every option's row, from the fields of :class:`MeasureOptions` and the kinds'
#: sections (their help is the ``--help`` text; their order, its order).
OPTIONS: dict[str, OptionSpec] = {
    f.name: OptionSpec(f.name, **f.metadata)
    for f in (*fields(MeasureOptions), *(g for section in SECTIONS for g in fields(section)))
    if f.metadata
}

#: The shortest ``min_time`` docs/faq.md advises on a noisy runner ("keep ``min_time`` at 0.5 s
#: or more"); a shorter one is accepted, with a warning (:func:`short_min_time`).
ADVISED_MIN_TIME = 0.5


def short_min_time(min_time: float, source: str) -> str | None:
    """The warning for a ``min_time`` below :data:`ADVISED_MIN_TIME` (``source``: where it was
    set), or None. Starts with ``min_time`` so that a filter can silence it."""
    if min_time >= ADVISED_MIN_TIME:
        return None
    return (
        f"min_time {format_time(min_time)} ({source}) is below the {ADVISED_MIN_TIME:g} s "
        f"docs/faq.md advises: fewer ~10 ms blocks, noisier verdicts. Set {ADVISED_MIN_TIME:g} s "
        f"or more, or filterwarnings = ignore:min_time where short timings are meant"
    )


#: Keywords accepted by ``@pytest.mark.torchperf`` and by a ``torchperf(...)`` call.
VALID_KEYWORDS: tuple[str, ...] = tuple(sorted([*OPTIONS, "name"]))


#: What an unknown keyword's error says instead of a close match, for a keyword a user may expect.
_KEYWORD_HINTS = {
    "device": (
        " A measurement runs on the device its model and inputs are on: move them there "
        "(model.to(torchperf_device), the device --torchperf-device names)."
    ),
}


def check_keywords(
    keywords: Mapping[str, object], where: str, refused: Collection[str] = ()
) -> None:
    """Raise :class:`OptionError` for an unknown keyword, or one of the ``refused`` options that
    ``where`` may not set, naming ``where`` and the keywords it accepts (the refused left out)."""
    valid = [key for key in VALID_KEYWORDS if key not in refused]
    for key in keywords:
        if key in refused:
            raise OptionError(
                f"{where}: {key}= cannot be set there. Valid options: {', '.join(valid)}."
            )
        if key not in VALID_KEYWORDS:
            close = difflib.get_close_matches(key, valid, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else _KEYWORD_HINTS.get(key, "")
            raise OptionError(
                f"{where}: unknown torchperf option {key!r}.{hint} "
                f"Valid options: {', '.join(valid)}."
            )


def parse_layer(
    values: Mapping[str, object], where: str, refused: Collection[str] = ()
) -> dict[str, Any]:
    """Validate and parse one layer of option values (marker, call, CLI or ini); ``refused``:
    options this layer may not set (:func:`check_keywords`).

    ``Any``: each value has its own option's type (the table's parser gives it), and the merged
    layers are passed to the dataclass ``replace``, whose keyword types mypy checks per field."""
    check_keywords(values, where, refused)
    parsed: dict[str, Any] = {}
    for key, raw in values.items():
        if key == "name":
            parsed[key] = None if raw is None else _parse_or_raise(parse_label, raw, where, key)
            continue
        if raw is None:
            continue  # "not set at this layer": fall through to the next one
        parsed[key] = _parse_or_raise(OPTIONS[key].parse, raw, where, key)
    return parsed


def _parse_or_raise(parse: Callable[[object], Any], raw: object, where: str, key: str) -> Any:
    try:
        return parse(raw)
    except OptionError as exc:
        raise OptionError(f"{where}: invalid value for {key}: {exc}") from None


def resolve(*layers: Mapping[str, Any]) -> MeasureOptions:
    """Merge parsed layers, highest precedence first, over the defaults of :class:`MeasureOptions`
    (a kind's own options over its section's defaults)."""
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        merged.update({k: v for k, v in layer.items() if k in OPTIONS and v is not None})
    sections = tuple(
        replace(t(), **{f.name: merged.pop(f.name) for f in fields(t) if f.name in merged})
        for t in SECTIONS
    )
    return replace(MeasureOptions(), **merged, sections=sections)


#: The options every kind shares (the :class:`MeasureOptions` fields but its kinds' sections).
_SHARED_FIELDS = tuple(f.name for f in fields(MeasureOptions) if f.name != "sections")
