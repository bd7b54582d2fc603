"""How one option of a measurement is parsed and where it may be set (:class:`OptionSpec`): the
rows of the option table (:data:`pytest_torchperf.options.measure_options.OPTIONS`), each declared
with its field (:func:`option`) in :class:`~pytest_torchperf.options.measure_options.MeasureOptions`
or a measurement kind's section (``kinds/<kind>/options.py``). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OptionSpec:
    """How one option is parsed and where it may be set."""

    name: str
    #: The raw value as the user wrote it (a call's keyword, a marker's, a command line's or an
    #: ini file's text) -> the option's value (each parser returns its own type).
    parse: Callable[[object], Any]
    help: str
    cli: bool = True  #: settable with ``--torchperf-<name>`` and ini ``torchperf_<name>``


def option(default: Any, parse: Callable[[object], Any], help: str, *, cli: bool = True) -> Any:
    """An options dataclass's field that is an option: its default and :class:`OptionSpec` row.

    ``Any``: the field's default, as mypy sees it (a ``dataclasses.field`` at run time)."""
    return field(default=default, metadata={"parse": parse, "help": help, "cli": cli})
