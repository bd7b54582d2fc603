"""Options of a measurement: the option table, validation and precedence (the value parsers are in
:mod:`.values`).

Pure module (no pytest, no torch). Every user-settable option of a measurement is described once
in ``OPTIONS``; the pytest layer feeds it the values from each layer and gets back one resolved
:class:`MeasureOptions`. Precedence, highest first: keyword of the ``torchperf(...)`` call,
keyword of the ``@pytest.mark.torchperf`` marker, command-line option, ini key, built-in default.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_torchperf.core.errors import (
    OptionError,  # defined apart so that variant_options can raise it too
)
from pytest_torchperf.core.types import UserValue
from pytest_torchperf.core.units import format_time
from pytest_torchperf.kinds import parts
from pytest_torchperf.options.option_spec import OptionSpec
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


#: The measurement kinds' ``options`` parts: their option rows and ``SECTION`` dataclass (the
#: fallback kind has none of its own: it counts with the instruction count's options).
_KIND_PARTS = parts("options")
#: The kinds' option dataclasses (:attr:`MeasureOptions.sections`).
SECTIONS: tuple[type[DataclassInstance], ...] = tuple(
    module.SECTION for module in _KIND_PARTS if getattr(module, "SECTION", None) is not None
)

S = TypeVar("S")


@dataclass(frozen=True)
class MeasureOptions:
    """Resolved options of one measurement (one ``torchperf(...)`` call or one whole-test measurement)."""

    #: Fail when the candidate is slower than the baseline by more than this fraction.
    max_slowdown: float = 0.10
    #: Seconds of timed blocks to collect per measurement (0.25 s instead of 1 s roughly doubled
    #: false alarms on a shared 2-vCPU VM; see docs/reliability.md).
    min_time: float = 1.0
    #: Seconds of untimed warm-up calls (at least 3 calls are always made).
    warmup: float = 0.2
    #: Intra-op threads during timing (``torch.set_num_threads``); 1 is the stable choice on CI.
    threads: int = 1
    #: Inconclusive verdicts fail the test instead of warning.
    strict: bool = False
    #: Contention guard: below this process CPU share (CPU time / wall time) a CPU measurement is
    #: re-measured, then inconclusive. 0 disables the guard.
    min_cpu_share: float = 0.9
    #: Spread guard: above this IQR/median a measurement is re-measured, then inconclusive.
    max_spread: float = 0.25
    #: Neighbour guard: above this share of the other CPUs kept busy by other processes while
    #: timing, a CPU measurement is re-measured, then inconclusive. 1 (100%) disables it.
    max_neighbour_load: float = 0.5
    #: Machine guard: a CPU pass whose calibration kernel ran this much slower than when the
    #: baseline was saved is re-measured, then inconclusive (and is not saved).
    max_machine_slowdown: float = 0.25
    #: GPU clock guard: a CUDA pass whose SM clock fell below this share of its maximum (or that
    #: the driver throttled for heat, a power brake or a hardware slowdown) is re-measured,
    #: then inconclusive (needs nvidia-ml-py). 0 disables it.
    min_gpu_clock: float = 0.75
    #: A timing pass within a limit the stored sessions' process noise widened beyond this many
    #: times ``max_slowdown`` is inconclusive, and a save whose sessions imply such a limit
    #: fails: that limit gates nothing. 0 (``off``) disables the bound.
    max_widening: float = 3.0
    #: Time ``nn.Module`` targets in ``eval()`` mode under ``torch.no_grad()`` (restored afterwards).
    inference: bool = True
    #: Fail when the target's outputs contain NaN or inf.
    check_finite: bool = True
    #: Free-form group shown in the summary and reports.
    group: str | None = None
    #: Record noise-free counters (FLOPs, ATen ops, parameters, peak memory) and gate on changes.
    counters: bool = True
    #: Counters recorded but not gated (any of ``flops``, ``ops``, ``params``, ``memory``).
    ignore_counters: tuple[str, ...] = ()
    #: Seed for torch/random/numpy before each perf test (its fixtures included), so unseeded
    #: models and inputs are the same in every run and their numerics can be compared;
    #: ``SEED_OFF`` (-1, written ``off``) disables it.
    seed: int = 0
    #: Variants to measure side by side, each with its settings (default: eager only).
    variants: tuple[VariantSpec, ...] = (("eager", ()),)
    #: Required speedup vs eager per variant, e.g. ``(("compiled", 1.2),)``.
    min_speedup: tuple[tuple[str, float], ...] = ()
    #: Accuracy tolerance overrides per variant (defaults: ``variants.registry.VARIANTS``).
    accuracy: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = ()
    #: Fail when building a variant (compile, quantize, first call) takes longer than this.
    max_compile_time: float = 180.0
    #: ``fn(outputs, targets) -> float`` computed per variant on ``data`` and gated across runs.
    metric: Callable[..., Any] | None = None
    #: ``(inputs, targets)``: the labelled batch for ``metric``.
    data: tuple[UserValue, UserValue] | None = None
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


OPTIONS: dict[str, OptionSpec] = {
    spec.name: spec
    for spec in (
        OptionSpec(
            "max_slowdown",
            parse_fraction,
            "Slowdown beyond which a test fails, e.g. 10% or 0.1 (default 10%)",
        ),
        OptionSpec(
            "min_time",
            parse_duration,
            "Seconds of timed samples per measurement, e.g. 1s or 500ms (default 1s)",
        ),
        OptionSpec(
            "warmup",
            parse_duration,
            "Seconds of untimed warm-up calls before timing (default 0.2s)",
        ),
        OptionSpec("threads", parse_positive_int, "Intra-op threads while timing (default 1)"),
        OptionSpec(
            "strict",
            parse_bool,
            "Fail what would only warn: inconclusive verdicts (noisy machine), measurements "
            "with no baseline (a misspelt storage folder, baselines never committed), and a "
            "compare that judged timing for under half its measurements",
        ),
        OptionSpec(
            "min_cpu_share",
            parse_share,
            "Contention guard: CPU measurements with a lower process "
            "CPU share are inconclusive, e.g. 0.9 (default; 0 disables)",
        ),
        OptionSpec(
            "max_spread",
            parse_fraction,
            "Spread guard: measurements with a larger IQR/median "
            "are inconclusive, e.g. 25% (default)",
        ),
        OptionSpec(
            "max_machine_slowdown",
            parse_fraction,
            "Machine guard: CPU measurements during "
            "which the calibration kernel ran more than this slower than when the baseline "
            "was saved are inconclusive and not saved, e.g. 25% (default)",
        ),
        OptionSpec(
            "min_gpu_clock",
            parse_share,
            "GPU clock guard: CUDA measurements while the SM clock was below this share of its "
            "maximum (or throttled for heat or a power brake) are inconclusive, e.g. 0.75 "
            "(default; 0 disables; needs nvidia-ml-py)",
        ),
        OptionSpec(
            "max_widening",
            parse_factor,
            "Widest limit, as a multiple of max_slowdown, that the stored sessions' process "
            "noise may widen it to: beyond, timing is not judged and a save fails, e.g. 3x "
            "(default; off disables)",
        ),
        OptionSpec(
            "max_neighbour_load",
            parse_share,
            "Neighbour guard: CPU measurements while other "
            "processes kept more of the other CPUs busy are inconclusive, e.g. 50% "
            "(default; 100% disables)",
        ),
        OptionSpec(
            "inference",
            parse_bool,
            "Time nn.Module targets in eval() mode under no_grad (default true)",
            cli=False,
        ),
        OptionSpec(
            "check_finite",
            parse_bool,
            "Fail when outputs contain NaN or inf (default true)",
            cli=False,
        ),
        OptionSpec("group", parse_label, "Group label shown in the summary", cli=False),
        OptionSpec(
            "counters",
            parse_bool,
            "Record FLOPs/op/parameter/memory counters and fail when they change (default true)",
            cli=False,
        ),
        OptionSpec(
            "ignore_counters",
            parse_counter_names,
            "Counters not gated, comma-separated: flops, ops, params, memory, graphs",
        ),
        OptionSpec(
            "seed",
            parse_seed,
            "Seed torch, random and numpy before each perf test so "
            "outputs are comparable across runs (default 0; off disables)",
        ),
        OptionSpec(
            "variants",
            parse_variants,
            "Variants to measure side by side: eager, compiled, fused, amp, int8",
            cli=False,
        ),
        OptionSpec(
            "min_speedup", parse_min_speedup, "Required speedup vs eager per variant", cli=False
        ),
        OptionSpec("accuracy", parse_accuracy, "Accuracy tolerances per variant", cli=False),
        OptionSpec(
            "max_compile_time",
            parse_duration,
            "Fail when building a variant (compile, "
            "quantize, first call) takes longer, e.g. 60s (default 180s)",
        ),
        OptionSpec(
            "metric", parse_metric, "fn(outputs, targets) -> float gated per variant", cli=False
        ),
        OptionSpec("data", parse_data, "(inputs, targets) for metric", cli=False),
        *(row for module in _KIND_PARTS for row in module.OPTIONS),
    )
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
        f"min_time {format_time(min_time)} ({source}) is below {ADVISED_MIN_TIME:g} s, the "
        f"least docs/faq.md advises on a noisy runner (docs/reliability.md measured its "
        f"false-alarm and detection figures at the default 1 s): a shorter pass holds fewer "
        f"~10 ms blocks, so it says less about the code's speed. Set min_time to "
        f"{ADVISED_MIN_TIME:g} s or more (e.g. --torchperf-min-time=1s), or, where short "
        f"timings are meant, filter this warning (filterwarnings = ignore:min_time)"
    )


#: Keywords accepted by ``@pytest.mark.torchperf`` and by a ``torchperf(...)`` call.
VALID_KEYWORDS: tuple[str, ...] = tuple(sorted([*OPTIONS, "name"]))


def check_keywords(keywords: Mapping[str, object], where: str) -> None:
    """Raise :class:`OptionError` for an unknown keyword, naming ``where`` and the valid keywords."""
    for key in keywords:
        if key not in VALID_KEYWORDS:
            close = difflib.get_close_matches(key, VALID_KEYWORDS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise OptionError(
                f"{where}: unknown torchperf option {key!r}.{hint} "
                f"Valid options: {', '.join(VALID_KEYWORDS)}."
            )


def parse_layer(values: Mapping[str, object], where: str) -> dict[str, Any]:
    """Validate and parse one layer of option values (marker, call, CLI or ini).

    ``Any``: each value has its own option's type (the table's parser gives it), and the merged
    layers are passed to the dataclass ``replace``, whose keyword types mypy checks per field."""
    check_keywords(values, where)
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


def option_names() -> tuple[str, ...]:
    """Names of every option: the :class:`MeasureOptions` fields and the kinds' own (for
    documentation and tests)."""
    return (*_SHARED_FIELDS, *(f.name for t in SECTIONS for f in fields(t)))


#: The options every kind shares (the :class:`MeasureOptions` fields but its kinds' sections).
_SHARED_FIELDS = tuple(f.name for f in fields(MeasureOptions) if f.name != "sections")
