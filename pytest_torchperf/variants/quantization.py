"""int8 models with the current recommended stack (torchao), for the int8 variant and the
``torchperf_quantized_model`` fixture.

* ``dynamic`` (default for models without convolutions, and on CUDA): torchao
  ``Int8DynamicActivationInt8WeightConfig`` on every ``nn.Linear``, then ``torch.compile``
  (int8 GEMMs need inductor to be fast: x3.2 on an MLP at batch 64, measured on a 2-vCPU Xeon).
* ``static`` (default for conv nets on x86 CPUs): PT2E post-training quantization with
  ``X86InductorQuantizer`` - export (``strict=True``; non-strict breaks on reused modules),
  prepare, calibrate, convert, then compile *with inductor freezing* (without it the quantized
  ops do not lower to fused int8 kernels): x5.4 on resnet18.
* ``weight_only``: torchao ``Int8WeightOnlyConfig`` then compile (a memory-bandwidth win on GPUs).

``torch.ao.quantization`` is deprecated and is not used. Every configuration is created with
``set_inductor_config=False``: torchao otherwise changes global inductor settings for the rest
of the process.
"""

from __future__ import annotations

import copy
import functools
import inspect
import platform
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_torchperf.core.types import Target, UserValue
from pytest_torchperf.variants.compilers import _first_line, inductor_problem, without_log_line
from pytest_torchperf.variants.registry import INT8_MODES

if TYPE_CHECKING:  # torch is imported lazily, when a model is quantized
    import torch
    from torch.export.dynamic_shapes import Dim


class QuantizationUnavailable(RuntimeError):
    """The requested int8 mode cannot be built on this device/installation (message says why)."""


class QuantizationError(RuntimeError):
    """Quantizing the user's model failed (message names the step and the error)."""


@dataclass
class QuantizedModel:
    """An int8 model ready to call (compiled where the mode needs it) and how it was built."""

    model: Target
    mode: str
    #: Human-readable recipe, e.g. ``torchao Int8DynamicActivationInt8WeightConfig + torch.compile``.
    method: str
    #: How many layers (torchao) or quantize nodes (PT2E) were quantized: never 0.
    quantized: int
    #: Seconds spent quantizing and compiling (including the first compiled call).
    build_time: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: Why this machine's int8 outputs are expected to drift (see :func:`int8_saturation`), told
    #: with an accuracy failure; None where nothing is known against them.
    accuracy_caveat: str | None = None

    def __call__(self, *args: UserValue, **kwargs: UserValue) -> UserValue:
        return self.model(*args, **kwargs)


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "x86", "i686")


def default_mode(model: torch.nn.Module, device_type: str) -> str:
    """``static`` for conv nets on x86 CPUs (PT2E), otherwise ``dynamic``."""
    import torch

    has_conv = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in model.modules())
    return "static" if device_type == "cpu" and _is_x86() and has_conv else "dynamic"


def _as_args(inputs: UserValue) -> tuple[UserValue, ...]:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def quantize_model(
    model: object,
    example_inputs: UserValue,
    mode: str | None = None,
    calibration: Iterable[UserValue] | None = None,
    *,
    compile: bool = True,
) -> QuantizedModel:
    """Return an int8 version of ``model`` (the original is not modified).

    ``example_inputs``: one input or a tuple of positional inputs, used for export, the first
    (compiling) call and - when ``calibration`` is None - as the static mode's calibration batch.
    ``calibration``: an iterable of inputs (each one input or a tuple) for static mode.
    Raises :class:`QuantizationUnavailable` (with the reason) when the mode cannot exist here,
    :class:`QuantizationError` when the model fails to quantize.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise QuantizationUnavailable(
            f"int8 quantization needs an nn.Module (its nn.Linear/Conv layers are quantized), got "
            f"{type(model).__name__}"
        )
    device_type = next((t.device.type for t in (*model.parameters(), *model.buffers())), "cpu")
    if device_type not in ("cpu", "cuda"):
        raise QuantizationUnavailable(
            f"int8 quantization is not available on {device_type}: torchao's int8 kernels and "
            f"oneDNN run on cpu and cuda only"
        )
    if mode is not None and mode not in INT8_MODES:
        raise ValueError(f"unknown quantization mode {mode!r}; modes: {', '.join(INT8_MODES)}")
    try:
        # torch 2.14's pytree logs a deprecation for each Enum torchao 0.18 registers at import
        # ("Calling register_constant() on Enum subclasses is deprecated"): noise for users.
        with without_log_line("torch.utils._pytree", "register_constant() on Enum subclasses"):
            import torchao  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        raise QuantizationUnavailable(
            f"torchao is not importable ({_first_line(exc)}); pip install torchao"
        ) from None
    chosen = mode or default_mode(model, device_type)
    args = _as_args(example_inputs)
    start = time.perf_counter()
    notes: list[str] = []
    if chosen == "static":
        try:
            result = _static(model, args, calibration, device_type)
        except (QuantizationError, QuantizationUnavailable) as exc:
            if mode is not None:
                raise
            what = "failed" if isinstance(exc, QuantizationError) else "is not available"
            notes.append(f"static PT2E quantization {what} ({exc}); fell back to dynamic")
            chosen = "dynamic"
    if chosen != "static":
        result = _torchao(model, args, chosen, device_type, compile)
    # Only dynamic int8 multiplies int8 by int8 through oneDNN's matmul (the probe's path):
    # weight-only computes in float, and static PT2E on a capped-AVX2 run stayed close to fp32
    # (resnet18 rel-L2 0.020; reduce_range=True, the quantizer's remedy for such CPUs, gave 0.041).
    saturation = int8_saturation() if device_type == "cpu" and result.mode == "dynamic" else None
    if saturation is not None:
        result.accuracy_caveat = saturation
        notes.append(saturation)
    result.notes[:0] = notes
    result.build_time = time.perf_counter() - start
    return result


def _torchao(
    model: torch.nn.Module, args: tuple[UserValue, ...], mode: str, device_type: str, compile: bool
) -> QuantizedModel:
    import torch
    from torchao.quantization import (
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        quantize_,
    )

    config = (
        Int8WeightOnlyConfig(set_inductor_config=False)
        if mode == "weight_only"
        else Int8DynamicActivationInt8WeightConfig(set_inductor_config=False)
    )
    quantized = copy.deepcopy(model).eval()
    skipped = [
        name
        for name, m in quantized.named_modules()
        if isinstance(m, torch.nn.Linear) and not _int8_shape_ok(m, device_type)
    ]
    # torchao's own default filter (plain Linear layers, not e.g. attention's out_proj), narrowed.
    default_filter = inspect.signature(quantize_).parameters["filter_fn"].default
    try:
        quantize_(
            quantized,
            config,
            filter_fn=lambda m, fqn: (
                bool(default_filter(m, fqn)) and _int8_shape_ok(m, device_type)
            ),
        )
    except Exception as exc:  # noqa: BLE001
        raise QuantizationError(f"torchao quantize_ failed: {_first_line(exc)}") from None
    count = sum(
        1
        for m in quantized.modules()
        if isinstance(m, torch.nn.Linear) and type(m.weight).__name__ not in ("Parameter", "Tensor")
    )
    if count == 0:
        why = (
            f" (on CUDA, int8 matmul needs both dims a multiple of 8; not so for: "
            f"{', '.join(skipped)})"
            if skipped
            else ""
        )
        raise QuantizationUnavailable(
            f"int8 {mode}: the model has no nn.Linear layer torchao can quantize{why}, so an int8 "
            f"variant would equal eager"
        )
    method = f"torchao {type(config).__name__}"
    notes: list[str] = []
    if skipped:
        notes.append(
            f"kept in fp32 (CUDA int8 matmul needs dims that are multiples of 8): "
            f"{', '.join(skipped)}"
        )
    callable_model: Target = quantized
    problem = inductor_problem(device_type) if compile else "compile=False"
    if problem is None:
        callable_model = torch.compile(quantized)
        method += " + torch.compile(inductor)"
        try:
            with torch.no_grad(), warnings.catch_warnings():
                # torchao's Int8Tensor tells every compile it lacks a cache hash: noise for users.
                warnings.filterwarnings("ignore", message=".*_stable_hash_for_caching.*")
                callable_model(*args)
        except Exception as exc:  # noqa: BLE001
            raise QuantizationError(
                f"compiling the int8 model failed: {_first_line(exc)}"
            ) from None
    else:
        notes.append(f"not compiled ({problem}); eager int8 is usually slower than fp32")
    return QuantizedModel(callable_model, mode, method, count, notes=notes)


def _int8_shape_ok(layer: torch.nn.Module, device_type: str) -> bool:
    """Whether torchao's int8 kernels take this Linear here.

    On CUDA ``torch._int_mm`` needs both matrix dims to be multiples of 8: a 10-class head failed
    to compile on an H200 ("mat2.size(1) needs to be ... a multiple of 8, but got 10"), so such
    layers stay fp32 and the note says which.
    """
    import torch

    # Only Linear layers reach here (torchao's default filter picks them): others pass as is.
    if device_type != "cuda" or not isinstance(layer, torch.nn.Linear):
        return True
    return bool(layer.in_features % 8 == 0 and layer.out_features % 8 == 0)


def _batch_dynamic_shapes(args: Sequence[UserValue]) -> tuple[dict[int, Dim] | None, ...]:
    """Batch dimension ``Dim.AUTO`` (dynamic when export can keep it so) for tensor inputs.

    A batch of 1 is exported static: export specialises size-1 dims anyway (and logs a warning).
    """
    import torch

    return tuple(
        {0: torch.export.Dim.AUTO}
        if isinstance(a, torch.Tensor) and a.dim() > 0 and a.shape[0] > 1
        else None
        for a in args
    )


def _static(
    model: torch.nn.Module,
    args: tuple[UserValue, ...],
    calibration: Iterable[UserValue] | None,
    device_type: str,
) -> QuantizedModel:
    import torch

    if device_type != "cpu" or not _is_x86():
        raise QuantizationUnavailable(
            f"static int8 (PT2E with X86InductorQuantizer) needs an x86 CPU, not "
            f"{device_type} on {platform.machine()}; use mode='dynamic' or 'weight_only'"
        )
    problem = inductor_problem("cpu")
    if problem:
        raise QuantizationUnavailable(
            f"static int8 must be compiled with inductor freezing: {problem}"
        )
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    step = "torch.export (strict=True)"
    try:
        exported = torch.export.export(
            model.eval(), args, strict=True, dynamic_shapes=_batch_dynamic_shapes(args)
        ).module()
        step = "prepare_pt2e"
        quantizer = xiq.X86InductorQuantizer()
        quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
        prepared = prepare_pt2e(exported, quantizer)
        step = "calibration"
        with torch.no_grad():
            for batch in calibration if calibration is not None else [args]:
                prepared(*_as_args(batch))
        step = "convert_pt2e"
        converted = convert_pt2e(prepared)
    except QuantizationUnavailable:
        raise
    except Exception as exc:  # noqa: BLE001
        raise QuantizationError(f"{step} failed: {_first_line(exc)}") from None
    count = sum(
        1
        for n in converted.graph.nodes
        if "quantize_per" in str(n.target) and "dequantize" not in str(n.target)
    )
    if count == 0:
        raise QuantizationUnavailable(
            "static int8: the quantizer found no conv/linear pattern to "
            "quantize, so an int8 variant would equal eager"
        )
    compiled: Target = torch.compile(converted)
    try:
        # Freezing must be on at the first call: passed as a compile option it is silently ignored,
        # and without it the quantized ops do not lower.
        with (
            torch.no_grad(),
            torch._inductor.config.patch(freezing=True),
            warnings.catch_warnings(),
        ):
            # inductor's own int8 lowering copies a tensor the discouraged way (harmless noise).
            warnings.filterwarnings("ignore", message="To copy construct from a tensor")
            compiled(*args)
    except Exception as exc:  # noqa: BLE001
        raise QuantizationError(
            f"compiling the PT2E int8 graph failed: {_first_line(exc)}"
        ) from None
    notes = []
    if calibration is None:
        notes.append(
            "calibrated on the example inputs only (pass calibration= for representative data)"
        )
    return QuantizedModel(
        compiled,
        "static",
        "PT2E X86InductorQuantizer + torch.compile(freezing)",
        count,
        notes=notes,
    )


@functools.lru_cache(maxsize=1)
def int8_saturation() -> str | None:
    """Why dynamic int8 outputs drift far from fp32 on this CPU, or None where int8 products are
    exact.

    Measured, not inferred from CPU flags: on a CPU without VNNI (AVX-512 VNNI, AVX-VNNI or AMX;
    or with ``ONEDNN_MAX_CPU_ISA=AVX2``) oneDNN shifts signed int8 activations to unsigned (+128)
    and adds pairs of u8 x s8 products in 16-bit intermediates, which saturate (255 * 127 * 2 =
    64,770 > 32,767). A 64-term product of 127s, exactly 1,032,256, then comes out as 8,160, and
    a tiny int8 MLP drifted rel-L2 0.42 from fp32 instead of 0.009 (same machine, oneDNN capped).
    The ATen capability (``ATEN_CPU_CAPABILITY``) does not decide it: oneDNN's ISA does.
    """
    import torch

    depth = 64
    exact = 127 * 127 * depth
    try:
        a = torch.full((32, depth), 127, dtype=torch.int8)
        got = int(torch._int_mm(a, a.t().contiguous())[0, 0])
    except Exception:  # noqa: BLE001 - no int8 matmul to probe (or a warning turned error)
        return None
    if got == exact:
        return None
    return (
        f"this CPU's int8 matrix products saturate (a {depth}-term product of 127s gave "
        f"{got:,}, not {exact:,}: without VNNI, oneDNN adds pairs of u8 x s8 products in 16 "
        f"bits), so int8 outputs drift far more from fp32 here than on CPUs with AVX-512 VNNI, "
        f"AVX-VNNI or AMX; measure int8 on such a CPU or widen int8's limits for this one"
    )
