"""The ``time-or-instructions`` kind's options of a measurement: the instruction count's (it
counts with the same children and judges the count at the same limit). Pure."""

from __future__ import annotations

from pytest_torchperf.kinds.instructions.options import OPTIONS, SECTION

__all__ = ["OPTIONS", "SECTION"]
