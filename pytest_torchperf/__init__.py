"""pytest-torchperf: performance and accuracy regressions of PyTorch models fail CI like tests.

Importing this package (and its pytest plugin module) does not import torch; torch is imported
lazily when a measurement runs. The public names below are loaded on first access, so the plugin
module, which pytest imports in every run, pays only for what it uses.

Layers, imports pointing downwards only (see docs/architecture.md)::

    core  <-  variants  <-  options  <-  measure, store  <-  judge  <-  report  <-  run
          <-  pytest_plugin, cli
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_PUBLIC = {
    "MeasureOptions": "options.measure_options",
    "OptionError": "core.errors",
    "Result": "run.result",
    "BaselineFileError": "store.baselines",
    "BaselineStore": "store.baselines",
    "Outcome": "judge.outcome",
    "Verdict": "judge.verdict",
    "BlockTimer": "run.block_timer",
    "Profiler": "measure.profiling",
    "nvtx_range": "measure.profiling",
    "select_device": "measure.devices",
    "TorchperfWarning": "run.state",
    "load_results": "store.results",
    "quantize_model": "variants.quantization",
}

__all__ = [*sorted(_PUBLIC), "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .core.errors import OptionError as OptionError
    from .judge.outcome import Outcome as Outcome
    from .judge.verdict import Verdict as Verdict
    from .measure.devices import select_device as select_device
    from .measure.profiling import Profiler as Profiler
    from .measure.profiling import nvtx_range as nvtx_range
    from .options.measure_options import MeasureOptions as MeasureOptions
    from .run.block_timer import BlockTimer as BlockTimer
    from .run.result import Result as Result
    from .run.state import TorchperfWarning as TorchperfWarning
    from .store.baselines import BaselineFileError as BaselineFileError
    from .store.baselines import BaselineStore as BaselineStore
    from .store.results import load_results as load_results
    from .variants.quantization import quantize_model as quantize_model


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_torchperf' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
