"""pytest-torchperf: performance and accuracy regressions of PyTorch models fail CI like tests.

Importing this package (and its pytest plugin module) does not import torch; torch is imported
lazily when a measurement runs.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import MeasureOptions, OptionError  # noqa: E402
from .result import Result  # noqa: E402
from .storage import BaselineFileError, BaselineStore  # noqa: E402
from .verdict import Outcome, Verdict  # noqa: E402

__all__ = ["BaselineFileError", "BaselineStore", "MeasureOptions", "OptionError", "Outcome", "Result",
           "Verdict", "__version__"]
