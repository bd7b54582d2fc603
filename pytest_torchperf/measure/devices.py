"""Choosing the device tests run on, and what "absent" means for each kind.

``auto`` picks a real accelerator if one is present, else ``cpu``. It asks
``torch.accelerator.current_accelerator(check_available=True)``: the plain call names ``cuda`` on a
CUDA wheel without a GPU (``torch.cuda`` is importable there). Under pytest-xdist each worker ``gwN`` gets GPU
``N mod device_count`` so workers do not share a GPU.
"""

from __future__ import annotations

import os
import re
from typing import Any


class DeviceUnavailable(Exception):
    """The requested device is not present here; the message says why (tests skip with it)."""


def xdist_worker_index() -> int | None:
    """Index of this pytest-xdist worker (``gw3`` -> 3), or None outside xdist."""
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else None


def select_device(requested: str = "auto") -> Any:
    """Return the ``torch.device`` for ``requested`` (``auto``, ``cpu``, ``cuda``, ``cuda:1``, ``mps``...).

    Raises :class:`DeviceUnavailable` when the device is absent, and ``ValueError`` for a name
    torch does not know.
    """
    import torch

    text = (requested or "auto").strip().lower()
    if text == "auto":
        accelerator = torch.accelerator.current_accelerator(check_available=True)
        if accelerator is None:
            return torch.device("cpu")
        text = accelerator.type
    try:
        device = torch.device(text)
    except RuntimeError as exc:
        raise ValueError(
            f"{requested!r} is not a torch device name (examples: auto, cpu, cuda, cuda:1, mps)"
        ) from exc
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
            worker = xdist_worker_index()
            return torch.device("cuda", (worker or 0) % count)
        if device.index >= count:
            raise DeviceUnavailable(
                f"device {requested!r} requested but only {count} CUDA device(s) exist"
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
        raise DeviceUnavailable(
            f"device {requested!r} requested but torch.{device.type} is not available"
        )
    return device


def synchronize(device: Any) -> None:
    """Wait for queued work on ``device``; a no-op on CPU and where no accelerator is present."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return
    if dev.type == "cuda" and torch.cuda.is_available():
        torch.cuda.synchronize(dev)
    elif torch.accelerator.is_available():
        torch.accelerator.synchronize()
