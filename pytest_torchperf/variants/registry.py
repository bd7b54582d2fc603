"""The variants a target can be measured as, each defined once: its settings and their checks,
its accuracy tolerances, its flags and the function that builds it.

Adding a variant is one :class:`Variant` here plus its builder function ``build_<name>`` in
:mod:`pytest_torchperf.variants.builders`. Pure: importing this module
imports neither torch nor the builders; options parsing uses it at pytest start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial

from pytest_torchperf.core.errors import OptionError

#: ``torch.compile`` modes (``mode=`` of the compiled and fused variants).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: Accepted spellings of the amp variant's ``dtype``, and the dtype each names.
AMP_DTYPES = {
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
}
#: ``mode=`` of the int8 variant (see :mod:`pytest_torchperf.variants.quantization`).
INT8_MODES = ("dynamic", "static", "weight_only")
#: Accuracy tolerances a user can set per variant in ``accuracy={"int8": {"rel_l2": 0.1}}``.
ACCURACY_KEYS: tuple[str, ...] = ("rel_l2", "cosine", "max_abs", "top1", "metric")
#: Metrics where larger is better (the tolerance is a lower limit).
LOWER_LIMITS = ("cosine", "top1")
#: On CUDA, inductor's Triton kernels and cuDNN pick other reduction orders than eager: a conv net
#: compiled on an H200 (torch 2.11, benchmarks/gpu_e2e.sh) drifted rel-L2 1.9e-5 (compiled) and
#: 3.5e-5 (fused), above the CPU limit of 1e-5 with nothing wrong.
CUDA_COMPILED_TOLERANCES = {"rel_l2": 1e-4}
#: AMP in float16 is far closer to fp32 than bfloat16 (10 vs 7 mantissa bits).
AMP_FP16_TOLERANCES = {"rel_l2": 5e-3, "cosine": 0.9999, "metric": 0.03}

Check = Callable[[str, Mapping[str, object]], None]


@dataclass(frozen=True)
class Variant:
    """One way of running a target."""

    name: str
    #: What is built, in one line (reports and docs).
    what: str
    #: Settings accepted in ``variants={name: {...}}``.
    settings: tuple[str, ...] = ()
    #: Rejects setting values torch would only reject later, deep inside a build (OptionError).
    check: Check | None = None
    #: Default accuracy tolerances: ``rel_l2``/``max_abs`` upper limits, ``cosine``/``top1``
    #: lower limits, ``metric`` the largest change of the user metric.
    tolerances: Mapping[str, float] = field(default_factory=dict)
    #: Built with ``torch.compile``: graph counters (graphs, breaks, recompiles) apply.
    compiled: bool = False


def _one_of(
    name: str,
    settings: Mapping[str, object],
    key: str = "mode",
    allowed: Collection[str] = COMPILE_MODES,
    transform: Callable[[object], str] = str,
) -> None:
    """A check: the setting ``key`` is one of ``allowed`` (by default ``mode=``, a compile mode)."""
    if key in settings and transform(settings[key]) not in allowed:
        raise OptionError(
            f"variant {name!r}: {key}={settings[key]!r} is not one of {', '.join(allowed)}"
        )


def _check_compiled(name: str, settings: Mapping[str, object]) -> None:
    _one_of(name, settings)
    if "mode" in settings and "options" in settings:
        raise OptionError(
            "variant 'compiled': torch.compile takes either mode= or options=, "
            "not both; put the mode's settings in options (see "
            "torch._inductor.list_mode_options(mode))"
        )
    for key, (fits, expected) in _COMPILED_TYPES.items():
        if key in settings and not fits(settings[key]):
            raise OptionError(f"variant 'compiled': {key}={settings[key]!r} must be {expected}")


#: The compiled variant's settings torch would reject late: what each must be, in words.
_COMPILED_TYPES: dict[str, tuple[Callable[[object], bool], str]] = {
    "fullgraph": (lambda v: isinstance(v, bool), "True or False"),
    "dynamic": (lambda v: v in (True, False, None), "True, False or None"),
    "options": (lambda v: isinstance(v, Mapping), "a dict of inductor settings"),
    "backend": (
        lambda v: isinstance(v, str) or callable(v),
        "a backend name or a backend function",
    ),
}


# Measured drifts behind the tolerances (docs/variants.md): compiled/fused <= 3e-6 max abs on CPU;
# AMP bf16 rel-L2 0.5-1.2 %, fp16 0.15 %; int8 2-3.5 %.
VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "eager",
            "the model as given, fp32: the reference",
            tolerances={"rel_l2": 1e-5, "metric": 0.02},
        ),
        Variant(
            "compiled",
            "torch.compile (inductor unless backend=)",
            settings=("backend", "mode", "fullgraph", "dynamic", "options"),
            check=_check_compiled,
            tolerances={"rel_l2": 1e-5, "metric": 0.02},
            compiled=True,
        ),
        Variant(
            "fused",
            "an inference-frozen graph: inductor freezing, else the fx conv-bn fold",
            settings=("mode",),
            check=_one_of,
            tolerances={"rel_l2": 1e-5, "metric": 0.02},
            compiled=True,
        ),
        Variant(
            "amp",
            "torch.autocast: bf16 on CPU, fp16 on CUDA",
            settings=("dtype",),
            check=partial(
                _one_of,
                key="dtype",
                allowed=AMP_DTYPES,
                transform=lambda v: str(v).replace("torch.", "").lower(),
            ),
            tolerances={"rel_l2": 3e-2, "cosine": 0.999, "metric": 0.03},
        ),
        Variant(
            "int8",
            "torchao dynamic int8 or PT2E static int8, compiled",
            settings=("mode",),
            check=partial(_one_of, allowed=INT8_MODES),
            tolerances={"rel_l2": 6e-2, "cosine": 0.998, "metric": 0.05},
        ),
    )
}
#: The variants, in display order (eager is the fp32 reference).
VARIANT_NAMES: tuple[str, ...] = tuple(VARIANTS)
#: Variants built with torch.compile (graph counters and recompiles apply).
COMPILED_VARIANTS: tuple[str, ...] = tuple(n for n, v in VARIANTS.items() if v.compiled)


def variant_of(label: str) -> str:
    """The variant a measurement's label names (``mlp[compiled]``: ``compiled``; ``mlp`` or a
    parametrized ``mlp[bs8]``: ``eager``)."""
    head, bracket, tail = label.rpartition("[")
    name = tail.removesuffix("]") if bracket and head and label.endswith("]") else ""
    return name if name in VARIANTS else "eager"


def tolerances(
    variant: str,
    overrides: Mapping[str, float] | None = None,
    amp_dtype: str | None = None,
    device: str = "cpu",
) -> dict[str, float]:
    """Tolerances of one variant: its defaults (fp16 AMP and CUDA compiles have their own), then
    the user's overrides."""
    spec = VARIANTS.get(variant)
    base: Mapping[str, float] = spec.tolerances if spec is not None else {}
    if variant == "amp" and amp_dtype == "float16":
        base = AMP_FP16_TOLERANCES
    if spec is not None and spec.compiled and device.startswith("cuda"):
        base = {**base, **CUDA_COMPILED_TOLERANCES}
    return {**base, **(overrides or {})}
