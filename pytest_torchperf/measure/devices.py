"""Choosing the device tests run on, and what "absent" means for each kind; the device a
measurement's target computes on (:func:`infer_device`).

``auto`` picks a real accelerator if one is present, else ``cpu``. It asks
``torch.accelerator.current_accelerator(check_available=True)``: the plain call names ``cuda`` on
a CUDA wheel without a GPU (``torch.cuda`` is importable there). Under pytest-xdist each worker
``gwN`` gets GPU ``N mod device_count`` so workers do not share a GPU.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_torchperf.core.types import UserValue
from pytest_torchperf.core.units import counted
from pytest_torchperf.options.values import DEVICE_CHOICES, parse_device

if TYPE_CHECKING:  # torch is imported lazily, when a device is chosen
    import torch


class DeviceUnavailable(Exception):
    """The requested device is not present here; the message says why (tests skip with it)."""


def select_device(requested: str = "auto") -> torch.device:
    """Return the ``torch.device`` for ``requested`` (``auto``, ``cpu``, ``cuda``, ``cuda:1``, ``mps``...).

    Raises :class:`DeviceUnavailable` when the device is absent, and ``ValueError`` (an
    :class:`~pytest_torchperf.core.errors.OptionError`) for a name that is no device's.
    """
    import torch

    text = parse_device(requested or "auto")
    if text == "auto":
        accelerator = torch.accelerator.current_accelerator(check_available=True)
        if accelerator is None:
            return torch.device("cpu")
        text = accelerator.type
    try:
        device = torch.device(text)
    except RuntimeError:  # a type of a backend's extension (npu) that is not installed
        raise DeviceUnavailable(
            f"device {requested!r} requested but torch does not know the device type "
            f"{text.split(':')[0]!r}: a backend's type exists once its package is imported "
            f"(torch_npu for npu, in conftest.py for one), else the name is misspelt; {_USE}"
        ) from None
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        if not torch.cuda.is_available():
            built = (
                "a CUDA build without a usable GPU/driver"
                if torch.version.cuda
                else "a CPU-only torch build"
            )
            raise DeviceUnavailable(
                f"device {requested!r} requested but CUDA is not available ({built})"
            )
        count = torch.cuda.device_count()
        if device.index is None:
            worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
            return torch.device("cuda", int(worker.group(1)) % count if worker else 0)
        if device.index >= count:
            raise DeviceUnavailable(
                f"device {requested!r} requested but only {counted(count, 'CUDA device')} exist"
            )
        return device
    if device.type == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceUnavailable(
                f"device {requested!r} requested but MPS is not available "
                f"(needs Apple silicon and an MPS build of torch)"
            )
        return device
    module = getattr(torch, device.type, None)
    if module is None or not getattr(module, "is_available", lambda: False)():
        why = "reports no device" if module is not None else "does not exist"
        raise DeviceUnavailable(
            f"device {requested!r} requested but torch.{device.type} {why} here; {_USE}"
        )
    return device


#: The remedy of a device this machine cannot run a test on.
_USE = f"use {DEVICE_CHOICES}"


def infer_device(
    target: object, inputs: Sequence[UserValue], kwargs: Mapping[str, UserValue] | None = None
) -> str:
    """Where the target computes: its parameters' device, else the first input tensor's, else
    for a closure the device of the first module or tensor it captured (``lambda: model(x)``,
    ``functools.partial``, a bound method, a module or tensor it names as a global), else
    (opaque closures, test bodies) the accelerator if one is really present, else ``cpu``.

    Parameters come first: a GPU module fed CPU inputs (moved inside ``forward``) runs on the GPU.
    The accelerator fallback errs on the safe side: synchronising an idle GPU costs microseconds,
    while not synchronising a busy one would time kernel launches only. Captured tensors come
    before it: a closure over CPU tensors timed with CUDA events on a GPU machine lost the CPU
    guards (contention, calibration) and its clock said ``cuda-events``.
    """
    found = (
        _device_of(target)
        or _device_of([list(inputs), kwargs or {}])
        or next(filter(None, map(_device_of, _captured(target))), None)
    )
    return found or default_device()


def _device_of(value: object) -> str | None:
    """The device of a module's first parameter or buffer, or of the first tensor in a pytree."""
    import torch
    from torch.utils._pytree import tree_leaves

    module = getattr(value, "_orig_mod", value)  # a torch.compile'd module keeps its params there
    if isinstance(module, torch.nn.Module):
        for tensor in (*module.parameters(), *module.buffers()):
            if not tensor.is_meta:
                return str(tensor.device)
        return None
    for leaf in tree_leaves(value):
        if isinstance(leaf, torch.Tensor):  # meta too: such a measurement is skipped, saying so
            return str(leaf.device)
        if isinstance(leaf, torch.nn.Module):
            found = _device_of(leaf)
            if found is not None:
                return found
    return None


def _captured(target: object) -> list[object]:
    """What a callable closes over: closure cells, default arguments, a bound method's object,
    a ``functools.partial``'s arguments, then the tensors and modules its code names as globals
    (``x = torch.randn(...)`` at module level, then ``lambda: x @ x``). One level: enough for
    ``lambda: model(x)``; other globals (``torch``, containers) are not searched."""
    import functools

    import torch

    if isinstance(target, functools.partial):
        return [*target.args, *target.keywords.values(), *_captured(target.func)]
    values: list[object] = []
    owner = getattr(target, "__self__", None)
    if owner is not None:
        values.append(owner)
    function = getattr(target, "__func__", target)
    for cell in getattr(function, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell (a variable assigned later)
            continue
    values += list(getattr(function, "__defaults__", None) or ())
    code, namespace = getattr(function, "__code__", None), getattr(function, "__globals__", None)
    if code is not None and isinstance(namespace, dict):
        named = (namespace.get(name) for name in code.co_names)
        values += [v for v in named if isinstance(v, (torch.Tensor, torch.nn.Module))]
    return values


def default_device() -> str:
    """The accelerator if one is really present (not merely built for), else ``cpu``."""
    import torch

    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return str(accelerator) if accelerator is not None else "cpu"
