"""Building the variants of a target: eager, compiled, fused, amp, int8.

Each builder returns a :class:`BuiltVariant` whose first call has already happened (so compile
cost is measured once, as ``build_time``, and never inside timing), or raises
:class:`VariantUnavailable` with the reason when the variant cannot exist here - it is then
skipped, never silently measured as eager - or :class:`VariantBuildError` when the user's model
fails to build (a failure of the test, naming the variant).

What each variant really is, and the checks that it is not eager in disguise (docs/variants.md):

* ``compiled``: ``torch.compile`` (inductor unless ``backend=``; ``mode``, ``fullgraph``,
  ``dynamic``, ``options`` passed through). The backend is probed first.
* ``fused``: an inference-frozen graph: inductor with ``freezing`` switched on *globally around
  the first call* (``options={"freezing": True}`` alone is silently ignored; the option still
  gives the variant its own dynamo cache entry, distinct from ``compiled``). Freezing bypasses
  inductor's FX graph cache; that counter is the evidence it happened. Without inductor, the
  eager fx conv-bn fold. Never TorchScript (deprecated).
* ``amp``: ``torch.autocast`` with bf16 on CPU, fp16 on CUDA (``dtype=`` overrides); autocast
  warnings (e.g. "disabling autocast") are errors, and at least one op must run in low precision.
* ``int8``: :func:`pytest_torchperf.variants.quantization.quantize_model` with the device's default mode.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pytest_torchperf.core.types import JSON, Target, UserValue
from pytest_torchperf.core.units import counted
from pytest_torchperf.variants.compilers import _first_line, backend_problem, inductor_problem
from pytest_torchperf.variants.registry import AMP_DTYPES, VARIANTS

if TYPE_CHECKING:  # torch is imported lazily, when a variant is built
    from torch._ops import OpOverload


class VariantUnavailable(RuntimeError):
    """The variant cannot exist on this machine/device/installation; the message says why."""


class VariantBuildError(RuntimeError):
    """Building the variant from the user's model failed; the message names the step and error."""


@dataclass
class BuiltVariant:
    """A ready-to-time variant of a target."""

    name: str
    target: Target
    #: How it was built, for reports, e.g. ``torch.compile(backend='inductor')``.
    method: str
    #: Seconds to build the variant including its first call (compilation, quantization).
    build_time: float = 0.0
    #: Evidence that the variant is what it claims, a sentence for reports ("10 of 10
    #: floating-point ops ran in bfloat16"); "" where there is none.
    evidence: str = ""
    notes: list[str] = field(default_factory=list)
    #: ``bfloat16``/``float16`` for amp (its accuracy defaults depend on it), else None.
    amp_dtype: str | None = None
    #: What an accuracy failure of this variant should also say about the machine (int8 on a CPU
    #: whose int8 products saturate), else None.
    accuracy_caveat: str | None = None


#: Enters the global state the variant will be timed in (threads, eval, no_grad).
Prepare = Callable[[], ContextManager[None]]
#: A variant's settings as the user wrote them (``compiled={"mode": "max-autotune"}``): option
#: values, checked by the registry's checks and by torch itself.
Settings = dict[str, object]


@dataclass(frozen=True)
class Build:
    """What a ``build_<variant>`` function builds from: the variant's settings (its own copy), the
    user's target and call, the device type and the state timing will use."""

    settings: Settings
    target: Target
    inputs: tuple[UserValue, ...]
    kwargs: dict[str, UserValue]
    device_type: str
    prepare: Prepare

    def first_call(
        self, fn: Target, step: str, extra: ContextManager[object] | None = None
    ) -> UserValue:
        """Call the built ``fn`` once under ``prepare()`` (and ``extra``); the user's model
        failing in this variant is a :class:`VariantBuildError` naming the ``step``."""
        try:
            with self.prepare(), extra or contextlib.nullcontext():
                return fn(*self.inputs, **self.kwargs)
        except (VariantUnavailable, VariantBuildError):
            raise
        except Exception as exc:  # the user's model failed in this variant: say where
            raise VariantBuildError(f"{step} failed: {_first_line(exc)}") from exc


def build_variant(
    name: str,
    settings: Mapping[str, object],
    target: Target,
    inputs: Sequence[UserValue],
    kwargs: Mapping[str, UserValue],
    device_type: str,
    prepare: Prepare,
) -> BuiltVariant:
    """Build variant ``name`` of ``target`` and make its first call under ``prepare()``.

    ``prepare`` enters the same global state timing will use (threads, eval, no_grad): dynamo
    guards on it, so compiling under another state would recompile during timing.
    """
    builder: Callable[[Build], BuiltVariant] = globals()[f"build_{VARIANTS[name].name}"]
    start = time.perf_counter()
    built = builder(
        Build(dict(settings), target, tuple(inputs), dict(kwargs), device_type, prepare)
    )
    built.build_time = time.perf_counter() - start
    return built


def build_eager(build: Build) -> BuiltVariant:
    return BuiltVariant("eager", build.target, "eager fp32 (reference)")


def _text(setting: object) -> str | None:
    """A setting the registry checked against names (``mode``), as the name (None: unset)."""
    return None if setting is None else str(setting)


def _inductor_counters() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return dict(counters["inductor"])


def build_compiled(build: Build) -> BuiltVariant:
    import torch

    settings, device_type = build.settings, build.device_type
    backend = settings.pop("backend", "inductor")
    problem = backend_problem(backend, device_type)
    if problem:
        raise VariantUnavailable(problem)
    notes = []
    if settings.get("mode") == "reduce-overhead" and device_type != "cuda":
        notes.append("mode='reduce-overhead' uses CUDA graphs, which do nothing on " + device_type)
    try:
        # The registry checked each setting's type (registry._check_compiled: a backend name or
        # function, a mode name, bools, an options dict); torch rejects the rest, caught below.
        compiled = torch.compile(
            build.target,
            backend=cast("str | Callable[..., Any]", backend),
            **cast("dict[str, Any]", settings),
        )
    except Exception as exc:  # noqa: BLE001 - settings torch rejects (an unknown option key, ...)
        raise VariantBuildError(
            f"torch.compile rejected the settings {settings!r}: {_first_line(exc)}"
        ) from None
    build.first_call(compiled, "torch.compile (first call)")
    shown = ", ".join([f"backend={backend!r}", *(f"{k}={v!r}" for k, v in settings.items())])
    return BuiltVariant("compiled", compiled, f"torch.compile({shown})", notes=notes)


def build_fused(build: Build) -> BuiltVariant:
    import torch

    problem = inductor_problem(build.device_type)
    if problem:
        return _fx_fused(build, problem)
    before = _inductor_counters()
    mode = _text(build.settings.get("mode"))
    # options={"freezing": True} is ignored by inductor but makes this a distinct backend, so
    # dynamo does not hand back the "compiled" variant's graph from its cache for the same model.
    # torch.compile takes mode or options, not both: a mode is spelled out as its options.
    options = {**(torch._inductor.list_mode_options(mode) if mode else {}), "freezing": True}
    compiled = torch.compile(build.target, backend="inductor", options=options)
    build.first_call(
        compiled,
        "torch.compile with freezing (first call)",
        torch._inductor.config.patch(freezing=True),
    )
    after = _inductor_counters()
    evidence: dict[str, JSON] = {
        k: after[k] - before.get(k, 0)
        for k in after
        if after[k] != before.get(k, 0)
        and (k == "fxgraph_cache_bypass" or "weight_pack" in k or "folding" in k)
    }
    notes = []
    if not evidence:
        notes.append(
            "inductor reported no sign of freezing (no FX cache bypass, no weight "
            "prepacking); was the target run with gradients enabled? freezing needs an "
            "nn.Module in inference mode"
        )
    return BuiltVariant(
        "fused",
        compiled,
        "torch.compile(backend='inductor') + inductor freezing"
        + (f", mode={mode!r}" if mode else ""),
        evidence=(
            "inductor counted freezing's work: "
            + ", ".join(f"{k} +{v}" for k, v in evidence.items())
            if evidence
            else ""
        ),
        notes=notes,
    )


def _fx_fused(build: Build, why: str) -> BuiltVariant:
    import torch
    import torch.fx.experimental.optimization as fx_optimization

    target = build.target

    if not isinstance(target, torch.nn.Module):
        raise VariantUnavailable(f"{why}; the fallback (fx conv-bn fold) needs an nn.Module")
    batch_norms = sum(
        isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in target.modules()
    )
    if batch_norms == 0:
        raise VariantUnavailable(
            f"{why}; the fallback (fx conv-bn fold) has no BatchNorm to fold "
            f"here, so it would equal eager"
        )
    try:
        with build.prepare():
            fused = fx_optimization.fuse(target, inplace=False)
    except Exception as exc:  # noqa: BLE001
        raise VariantUnavailable(
            f"{why}; the fallback fx conv-bn fold cannot trace the model ({_first_line(exc)})"
        ) from None
    left = sum(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in fused.modules())
    build.first_call(fused, "fx-fused model (first call)")
    return BuiltVariant(
        "fused",
        fused,
        "torch.fx conv-bn fold (eager)",
        evidence=f"{counted(batch_norms - left, 'conv-bn pair')} folded",
        notes=[f"inductor unavailable ({why}); used the eager conv-bn fold"],
    )


def build_amp(build: Build) -> BuiltVariant:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    target, device_type = build.target, build.device_type
    requested = build.settings.get("dtype")
    if requested is not None:
        dtype_name = AMP_DTYPES.get(str(requested).replace("torch.", "").lower())
        if dtype_name is None:
            raise VariantBuildError(
                f"amp dtype {requested!r} is not supported; use 'bfloat16' or 'float16'"
            )
    else:
        dtype_name = "bfloat16" if device_type == "cpu" else "float16"
    if not torch.amp.is_autocast_available(device_type):
        raise VariantUnavailable(f"torch.autocast is not available for device type {device_type!r}")
    if device_type == "cuda" and dtype_name == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise VariantUnavailable("this GPU does not support bfloat16 autocast; use dtype='float16'")
    dtype = getattr(torch, dtype_name)
    notes = []
    if device_type == "cpu" and dtype_name == "float16":
        notes.append(
            "float16 autocast on CPU is usually slower than fp32 (x0.27 on AVX-512 "
            "without FP16 units)"
        )

    def amp_call(*args: UserValue, **kw: UserValue) -> UserValue:
        with torch.autocast(device_type, dtype=dtype):
            return target(*args, **kw)

    class LowPrecisionOps(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.low = self.total = 0

        def __torch_dispatch__(
            self,
            func: OpOverload,
            types: Sequence[type],
            args: Sequence[object] = (),
            kw: Mapping[str, object] | None = None,
        ) -> object:
            out = func(*args, **(kw or {}))
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                self.total += 1
                self.low += out.dtype in (torch.float16, torch.bfloat16)
            return out

    counter = LowPrecisionOps()
    with warnings.catch_warnings():
        # "CUDA is not available... Disabling autocast" and friends: amp would silently be fp32.
        warnings.filterwarnings("error", message=".*[Aa]utocast.*")
        try:
            with build.prepare(), counter:
                amp_call(*build.inputs, **build.kwargs)
        except Warning as exc:
            raise VariantUnavailable(f"autocast disabled itself: {exc}") from None
        except Exception as exc:
            raise VariantBuildError(
                f"autocast ({dtype_name}) call failed: {_first_line(exc)}"
            ) from exc
    if counter.low == 0:
        raise VariantUnavailable(
            f"autocast ran no op in {dtype_name} (of {counter.total} floating ops): the model has "
            f"no autocast-eligible op (matmul, linear, conv), so amp would equal eager"
        )
    amp_call.__name__ = f"amp_{getattr(target, '__name__', type(target).__name__)}"
    return BuiltVariant(
        "amp",
        amp_call,
        f"torch.autocast({device_type!r}, dtype={dtype_name})",
        evidence=f"{counter.low} of {counted(counter.total, 'floating-point op')} ran in {dtype_name}",
        notes=notes,
        amp_dtype=dtype_name,
    )


def build_int8(build: Build) -> BuiltVariant:
    from pytest_torchperf.variants.quantization import (
        QuantizationError,
        QuantizationUnavailable,
        quantize_model,
    )

    if build.kwargs:
        raise VariantUnavailable(
            "the int8 variant needs positional inputs only (export and "
            "calibration take a tuple of inputs)"
        )
    try:
        with build.prepare(), warnings.catch_warnings():
            # torchao's Int8Tensor tells every compile that it lacks a cache hash: noise for users.
            warnings.filterwarnings("ignore", message=".*_stable_hash_for_caching.*")
            mode = _text(build.settings.get("mode"))
            quantized = quantize_model(build.target, build.inputs, mode=mode)
    except QuantizationUnavailable as exc:
        raise VariantUnavailable(str(exc)) from None
    except QuantizationError as exc:
        raise VariantBuildError(f"int8 quantization: {exc}") from None
    return BuiltVariant(
        "int8",
        quantized.model,
        f"{quantized.mode}: {quantized.method}",
        evidence=(
            f"{counted(quantized.quantized, 'quantize node')} in the exported graph"
            if quantized.mode == "static"
            else f"{counted(quantized.quantized, 'layer')} quantized"
        ),
        notes=list(quantized.notes),
        accuracy_caveat=quantized.accuracy_caveat,
    )
