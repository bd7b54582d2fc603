"""Value parsers of the options: what a user types in a marker, on the command line or in an ini
file, turned into a value, or an :class:`OptionError` quoting the bad value and the accepted forms.

Pure module (no pytest, no torch).
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
from collections.abc import Callable
from typing import TypeVar

from pytest_torchperf.core.errors import OptionError

T = TypeVar("T")


def argparse_type(parse: Callable[[str], T]) -> Callable[[str], T]:
    """A value parser as an argparse ``type`` (of ``--torchperf-*`` and of the torchperf command):
    a bad value is argparse's usage error, quoting it."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__  # argparse names the type in some messages
    return convert


def parse_fraction(value: object) -> float:
    """Parse a relative threshold: ``"10%"``, ``"0.1"``, ``0.1`` -> 0.1.

    Bare numbers must be fractions below 1 so that ``10`` (meaning 10 %? 1000 %?) is never guessed;
    larger thresholds are written with a percent sign (``150%``).
    """
    text = str(value).strip()
    percent = text.endswith("%")
    try:
        if isinstance(value, bool):
            raise ValueError
        result = float(text[:-1]) / 100.0 if percent else float(text)
    except ValueError:
        raise OptionError(
            f"{value!r} is not a percentage or fraction (examples: '10%', 0.1)"
        ) from None
    if not percent and result >= 1.0:
        raise OptionError(
            f"{value!r} is ambiguous as a relative threshold: write a percentage such as "
            f"'{text}%' or a fraction below 1 such as 0.1"
        )
    if not math.isfinite(result) or result <= 0.0:
        raise OptionError(
            f"{value!r} must be a positive percentage or fraction (examples: '10%', 0.1)"
        )
    return result


def parse_factor(value: object) -> float:
    """Parse a multiple of at least 1: ``"3x"``, ``"3"``, ``3`` -> 3.0; ``off`` (or 0) -> 0.0,
    which disables the bound it feeds."""
    text = str(value).strip().lower()
    if text in ("off", "0", "0x"):
        return 0.0
    try:
        if isinstance(value, bool):
            raise ValueError
        result = float(text.removesuffix("x"))
    except ValueError:
        raise OptionError(f"{value!r} is not a factor (examples: '3x', 3, 'off')") from None
    if not math.isfinite(result) or result < 1.0:
        raise OptionError(f"{value!r} must be a factor of at least 1 (examples: '3x', 5), or 'off'")
    return result


_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(s|ms|us)?\s*$")
_DURATION_SCALE = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


def parse_duration(value: object) -> float:
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


def parse_positive_int(value: object) -> int:
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


def parse_bool(value: object) -> bool:
    """Parse a boolean from a Python bool or an ini word (``true``/``false``/``1``/``0``/``yes``/``no``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise OptionError(f"{value!r} is not a boolean (use true or false)")


def parse_share(value: object) -> float:
    """Parse a share between 0 and 1 (``0.9``, ``"90%"``); 0 disables the check it feeds."""
    text = str(value).strip()
    try:
        if isinstance(value, bool):
            raise ValueError
        share = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise OptionError(
            f"{value!r} is not a share between 0 and 1 (examples: 0.9, '90%')"
        ) from None
    if not 0.0 <= share <= 1.0:
        raise OptionError(f"{value!r} is not a share between 0 and 1 (examples: 0.9, '90%')")
    return share


def parse_counter_names(value: object) -> tuple[str, ...]:
    """Parse counter names to ignore: a list/tuple or a comma-separated string (``"memory,ops"``)."""
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        names = [str(v).strip() for v in value]
    else:
        raise OptionError(
            f"{value!r} is not a list of counter names (choose from {', '.join(COUNTER_NAMES)})"
        )
    unknown = [n for n in names if n not in COUNTER_NAMES]
    if unknown:
        close = difflib.get_close_matches(unknown[0], COUNTER_NAMES, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OptionError(
            f"unknown counter {unknown[0]!r}{hint}; counters are {', '.join(COUNTER_NAMES)}"
        )
    return tuple(sorted(set(names)))


#: Counter names a user can opt out of (``ignore_counters=["memory"]``); ``graphs`` covers the
#: graph count, graph breaks and recompiles of ``torch.compile``d targets.
COUNTER_NAMES = ("flops", "ops", "params", "memory", "graphs")


#: The value of :attr:`MeasureOptions.seed` meaning "do not seed" (``seed="off"``).
SEED_OFF = -1


def parse_seed(value: object) -> int:
    """Parse the per-test RNG seed: a non-negative integer, or ``off`` (:data:`SEED_OFF`)."""
    if value is False or str(value).strip().lower() in ("off", "none", "false"):
        return SEED_OFF
    try:
        seed = -1 if isinstance(value, bool) else int(str(value).strip())
    except ValueError:
        seed = -1
    if seed < 0:
        raise OptionError(f"{value!r} is not a seed (a non-negative integer, or 'off')")
    return seed


def parse_label(value: object) -> str:
    """Parse a measurement name or group: a non-empty string without path separators or newlines."""
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"{value!r} is not a non-empty string")
    if any(ch in value for ch in "/\\\n\r"):
        raise OptionError(f"{value!r} must not contain '/', '\\' or line breaks")
    return value.strip()


#: The device types tests can run on: torch 2.x's list that ``torch.device`` accepts (optionally
#: with ``:N``) but ``meta`` and ``privateuseone``, and ``npu``, the name Ascend's ``torch_npu``
#: gives the latter. Kept here so that a misspelt ``--torchperf-device`` is refused when pytest
#: starts, without importing torch.
DEVICE_TYPES = (
    "cpu", "cuda", "mps", "xpu", "hip", "hpu", "mtia", "maia", "xla", "npu", "ipu", "mkldnn",
    "opengl", "opencl", "ideep", "ve", "fpga", "lazy", "vulkan",
)  # fmt: skip

#: The devices a test can run on, as the messages list them: ``select_device`` gives a device of
#: the types torch has a module for (``torch.cuda``, ``torch.xpu``...) and of a type a backend's
#: package registers one for when imported; any other type it skips.
DEVICE_CHOICES = (
    "auto (an accelerator if present, else cpu), cpu, cuda, cuda:N (GPU number N), mps, xpu, "
    "mtia, or the type a backend's package registers when imported (hpu, npu, ...)"
)

_DEVICE_RE = re.compile(r"([a-z]+)(?::(0|[1-9][0-9]*))?")


def parse_device(value: object) -> str:
    """Parse a device name: ``auto``, or a torch device type with an optional index (``cpu``,
    ``cuda``, ``cuda:1``, ``mps``...), lower-cased. Whether the device is present is decided
    when a test asks for it (:func:`pytest_torchperf.measure.devices.select_device`); a TPU,
    which no machine can time, is refused here."""
    text = str(value).strip().lower()
    match = _DEVICE_RE.fullmatch(text)
    if match and match.group(1) in ("tpu", "xla"):
        named = (
            f"{value!r} is not a torch device type: torch calls a TPU 'xla' (torch_xla), and"
            if match.group(1) == "tpu"
            else f"{value!r} (a TPU or another device of torch_xla):"
        )
        raise OptionError(
            f"{named} pytest-torchperf cannot time an XLA device: its tensors compute lazily, "
            f"when torch_xla syncs them, which the timer does not do, so a block would time the "
            f"tracing. Use {DEVICE_CHOICES}"
        )
    if text == "auto" or (match and match.group(1) in DEVICE_TYPES):
        return text
    kind = match.group(1) if match else text.split(":")[0]
    known = ("auto", *DEVICE_TYPES)
    close = ["cuda"] if kind == "gpu" else difflib.get_close_matches(kind, known, n=1, cutoff=0.75)
    if match and (not close or kind == "meta"):
        # Another backend's name (``mlu``, ``musa``: registered with torch when its package is
        # imported) or one torch has that times nothing (``meta``): the test that asks for it
        # decides (select_device skips it where torch does not know the name). Refused here is
        # what reads as a typo of a known name.
        return text
    suffix = text[len(kind) :] if match else ""
    hint = f" (did you mean {close[0] + suffix!r}?)" if close else ""
    raise OptionError(f"{value!r} is not a device{hint}: use {DEVICE_CHOICES}")
