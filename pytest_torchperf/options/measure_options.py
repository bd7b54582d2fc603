"""Options of a measurement: parsing, validation and precedence.

Pure module (no pytest, no torch). Every user-settable option of a measurement is described once in
``OPTIONS``; the pytest layer feeds it the values from each layer and gets back one resolved
:class:`MeasureOptions`. Precedence, highest first: keyword of the ``torchperf(...)`` call, keyword of
the ``@pytest.mark.torchperf`` marker, command-line option, ini key, built-in default.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from pytest_torchperf.core.errors import (
    OptionError,  # defined apart so that variant_options can raise it too
)
from pytest_torchperf.options.variant_options import (  # noqa: F401 - re-exported: the option table below uses them
    ACCURACY_KEYS,
    VARIANT_NAMES,
    VariantSpec,
    parse_accuracy,
    parse_data,
    parse_metric,
    parse_min_speedup,
    parse_variant_filter,
    parse_variants,
)

# --------------------------------------------------------------------------------------------------
# Value parsers. Each accepts the forms a user would type in a marker, on the command line or in an
# ini file, and raises OptionError quoting the bad value and the accepted forms.
# --------------------------------------------------------------------------------------------------


def parse_fraction(value: Any) -> float:
    """Parse a relative threshold: ``"10%"``, ``"0.1"``, ``0.1`` -> 0.1.

    Bare numbers must be fractions below 1 so that ``10`` (meaning 10 %? 1000 %?) is never guessed;
    larger thresholds are written with a percent sign (``150%``).
    """
    text = str(value).strip()
    try:
        if text.endswith("%"):
            result = float(text[:-1].strip()) / 100.0
        else:
            if isinstance(value, bool):
                raise ValueError
            result = float(text)
            if result >= 1.0:
                raise OptionError(
                    f"{value!r} is ambiguous as a relative threshold: write a percentage such as "
                    f"'{text}%' or a fraction below 1 such as 0.1"
                )
    except ValueError as exc:
        if isinstance(exc, OptionError):
            raise
        raise OptionError(
            f"{value!r} is not a percentage or fraction (examples: '10%', 0.1)"
        ) from None
    if not math.isfinite(result) or result <= 0.0:
        raise OptionError(f"{value!r} must be a positive percentage or fraction (examples: '10%', 0.1)")
    return result


_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us)?\s*$")
_DURATION_SCALE = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


def parse_duration(value: Any) -> float:
    """Parse a duration: ``"1s"``, ``"500ms"``, ``"0.5"`` or ``0.5`` (seconds) -> seconds (> 0)."""
    if isinstance(value, bool):
        raise OptionError(f"{value!r} is not a duration (examples: '1s', '500ms', 0.5)")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION_RE.match(str(value))
        if not match:
            raise OptionError(f"{value!r} is not a duration (examples: '1s', '500ms', 0.5)")
        seconds = float(match.group(1)) * _DURATION_SCALE[match.group(2)]
    if not math.isfinite(seconds) or seconds <= 0.0:
        raise OptionError(f"{value!r} must be a positive duration (examples: '1s', '500ms', 0.5)")
    return seconds


def parse_positive_int(value: Any) -> int:
    """Parse a positive integer such as a thread count (``"1"``, ``4``)."""
    if isinstance(value, bool):
        raise OptionError(f"{value!r} is not a positive integer")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise OptionError(f"{value!r} is not a positive integer (example: 1)") from None
    if number < 1:
        raise OptionError(f"{value!r} is not a positive integer (example: 1)")
    return number


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_bool(value: Any) -> bool:
    """Parse a boolean from a Python bool or an ini word (``true``/``false``/``1``/``0``/``yes``/``no``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionError(f"{value!r} is not a boolean (use true or false)")


def parse_share(value: Any) -> float:
    """Parse a share between 0 and 1 (``0.9``, ``"90%"``); 0 disables the check it feeds."""
    text = str(value).strip()
    try:
        if isinstance(value, bool):
            raise ValueError
        share = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise OptionError(f"{value!r} is not a share between 0 and 1 (examples: 0.9, '90%')") from None
    if not 0.0 <= share <= 1.0:
        raise OptionError(f"{value!r} is not a share between 0 and 1 (examples: 0.9, '90%')")
    return share


def parse_counter_names(value: Any) -> tuple[str, ...]:
    """Parse counter names to ignore: a list/tuple or a comma-separated string (``"memory,ops"``)."""
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        names = [str(v).strip() for v in value]
    else:
        raise OptionError(f"{value!r} is not a list of counter names (choose from "
                          f"{', '.join(COUNTER_NAMES)})")
    unknown = [n for n in names if n not in COUNTER_NAMES]
    if unknown:
        raise OptionError(f"unknown counter {unknown[0]!r}; counters are {', '.join(COUNTER_NAMES)}")
    return tuple(sorted(set(names)))


#: Counter names a user can opt out of (``ignore_counters=["memory"]``); ``graphs`` covers the
#: graph count, graph breaks and recompiles of ``torch.compile``d targets.
COUNTER_NAMES = ("flops", "ops", "params", "memory", "graphs")


#: The value of :attr:`MeasureOptions.seed` meaning "do not seed" (``seed="off"``).
SEED_OFF = -1


def parse_seed(value: Any) -> int:
    """Parse the per-test RNG seed: a non-negative integer, or ``off`` (:data:`SEED_OFF`)."""
    if value is False or str(value).strip().lower() in ("off", "none", "false"):
        return SEED_OFF
    if isinstance(value, bool):
        raise OptionError(f"{value!r} is not a seed (a non-negative integer, or 'off')")
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise OptionError(f"{value!r} is not a seed (a non-negative integer, or 'off')") from None
    if seed < 0:
        raise OptionError(f"{value!r} is not a seed (a non-negative integer, or 'off')")
    return seed


def parse_label(value: Any) -> str:
    """Parse a measurement name or group: a non-empty string without path separators or newlines."""
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"{value!r} is not a non-empty string")
    if any(ch in value for ch in "/\\\n\r"):
        raise OptionError(f"{value!r} must not contain '/', '\\' or line breaks")
    return value.strip()


# --------------------------------------------------------------------------------------------------
# The option table.
# --------------------------------------------------------------------------------------------------


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
    data: tuple[Any, Any] | None = None

    def variant_names(self) -> tuple[str, ...]:
        """The variant names, in the order given."""
        return tuple(name for name, _ in self.variants)

    def variant_settings(self, name: str) -> dict[str, Any]:
        """Settings of one variant (empty when none were given)."""
        return dict(next((settings for n, settings in self.variants if n == name), ()))


@dataclass(frozen=True)
class OptionSpec:
    """How one option is parsed and where it may be set."""

    name: str
    parse: Callable[[Any], Any]
    help: str
    cli: bool = True  #: settable with ``--torchperf-<name>`` and ini ``torchperf_<name>``


OPTIONS: dict[str, OptionSpec] = {
    spec.name: spec
    for spec in (
        OptionSpec("max_slowdown", parse_fraction, "Slowdown beyond which a test fails, e.g. 10% or 0.1 (default 10%)"),
        OptionSpec("min_time", parse_duration, "Seconds of timed samples per measurement, e.g. 1s or 500ms (default 1s)"),
        OptionSpec("warmup", parse_duration, "Seconds of untimed warm-up calls before timing (default 0.2s)"),
        OptionSpec("threads", parse_positive_int, "Intra-op threads while timing (default 1)"),
        OptionSpec("strict", parse_bool, "Inconclusive verdicts (noisy machine) fail the test instead "
                   "of warning"),
        OptionSpec("min_cpu_share", parse_share, "Contention guard: CPU measurements with a lower process "
                   "CPU share are inconclusive, e.g. 0.9 (default; 0 disables)"),
        OptionSpec("max_spread", parse_fraction, "Spread guard: measurements with a larger IQR/median "
                   "are inconclusive, e.g. 25% (default)"),
        OptionSpec("max_machine_slowdown", parse_fraction, "Machine guard: CPU measurements during "
                   "which the calibration kernel ran more than this slower than when the baseline "
                   "was saved are inconclusive and not saved, e.g. 25% (default)"),
        OptionSpec("max_neighbour_load", parse_share, "Neighbour guard: CPU measurements while other "
                   "processes kept more of the other CPUs busy are inconclusive, e.g. 50% "
                   "(default; 100% disables)"),
        OptionSpec("inference", parse_bool, "Time nn.Module targets in eval() mode under no_grad (default true)", cli=False),
        OptionSpec("check_finite", parse_bool, "Fail when outputs contain NaN or inf (default true)", cli=False),
        OptionSpec("group", parse_label, "Group label shown in the summary", cli=False),
        OptionSpec("counters", parse_bool, "Record FLOPs/op/parameter/memory counters and fail when "
                   "they change (default true)", cli=False),
        OptionSpec("ignore_counters", parse_counter_names, "Counters not gated, comma-separated: "
                   "flops, ops, params, memory, graphs"),
        OptionSpec("seed", parse_seed, "Seed torch, random and numpy before each perf test so "
                   "outputs are comparable across runs (default 0; off disables)"),
        OptionSpec("variants", parse_variants, "Variants to measure side by side: eager, compiled, "
                   "fused, amp, int8", cli=False),
        OptionSpec("min_speedup", parse_min_speedup, "Required speedup vs eager per variant", cli=False),
        OptionSpec("accuracy", parse_accuracy, "Accuracy tolerances per variant", cli=False),
        OptionSpec("max_compile_time", parse_duration, "Fail when building a variant (compile, "
                   "quantize, first call) takes longer, e.g. 60s (default 180s)"),
        OptionSpec("metric", parse_metric, "fn(outputs, targets) -> float gated per variant", cli=False),
        OptionSpec("data", parse_data, "(inputs, targets) for metric", cli=False),
    )
}

#: Keywords accepted by ``@pytest.mark.torchperf`` and by a ``torchperf(...)`` call.
VALID_KEYWORDS: tuple[str, ...] = tuple(sorted([*OPTIONS, "name"]))


def check_keywords(keywords: Mapping[str, Any], where: str) -> None:
    """Raise :class:`OptionError` for an unknown keyword, naming ``where`` and the valid keywords."""
    for key in keywords:
        if key not in VALID_KEYWORDS:
            close = difflib.get_close_matches(key, VALID_KEYWORDS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise OptionError(
                f"{where}: unknown torchperf option {key!r}.{hint} "
                f"Valid options: {', '.join(VALID_KEYWORDS)}."
            )


def parse_layer(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validate and parse one layer of option values (marker, call, CLI or ini)."""
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


def _parse_or_raise(parse: Callable[[Any], Any], raw: Any, where: str, key: str) -> Any:
    try:
        return parse(raw)
    except OptionError as exc:
        raise OptionError(f"{where}: invalid value for {key}: {exc}") from None


def resolve(*layers: Mapping[str, Any]) -> MeasureOptions:
    """Merge parsed layers, highest precedence first, over the defaults of :class:`MeasureOptions`."""
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        merged.update({k: v for k, v in layer.items() if k in OPTIONS and v is not None})
    return replace(MeasureOptions(), **merged)


def option_names() -> tuple[str, ...]:
    """Names of the :class:`MeasureOptions` fields (for documentation and tests)."""
    return tuple(f.name for f in fields(MeasureOptions))
