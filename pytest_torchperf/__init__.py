"""pytest-torchperf: performance and accuracy regressions of PyTorch models fail CI like tests.

Importing this package (and its pytest plugin module) does not import torch; torch is imported
lazily when a measurement runs. The public names below are loaded on first access, so the plugin
module, which pytest imports in every run, pays only for what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_PUBLIC = {
    "MeasureOptions": "config",
    "OptionError": "config",
    "Result": "result",
    "BaselineFileError": "storage",
    "BaselineStore": "storage",
    "Outcome": "verdict",
    "Verdict": "verdict",
    "BlockTimer": "timer",
    "Profiler": "profiling",
    "nvtx_range": "nvtx",
    "select_device": "devices",
    "TorchperfWarning": "session",
    "load_results": "results",
    "quantize_model": "quantization",
}

__all__ = [*sorted(_PUBLIC), "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .config import MeasureOptions, OptionError
    from .devices import select_device
    from .nvtx import nvtx_range
    from .profiling import Profiler
    from .result import Result
    from .session import TorchperfWarning
    from .storage import BaselineFileError, BaselineStore
    from .timer import BlockTimer
    from .verdict import Outcome, Verdict
    from .results import load_results
    from .quantization import quantize_model


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_torchperf' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
