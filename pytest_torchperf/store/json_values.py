"""Raw JSON values read as what a report needs: the values a record keeps raw (a measurement
kind's data, another plugin's keys: :meth:`pytest_torchperf.store.record.Record.extra`) are
read here, leniently: a value of another type reads as empty. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

#: A JSON value as ``json.loads`` gives it (dict, list, str, int, float, bool, None).
JSON = object


def json_object(value: JSON) -> Mapping[str, JSON]:
    """A raw JSON value read as an object: its keys and values; empty for anything else (null,
    absent, another type). For the values the record keeps raw (:meth:`Record.extra`)."""
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def json_number(value: JSON) -> float | None:
    """A raw JSON value read as a number (an int stays an int); None for anything else."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def json_texts(value: JSON) -> list[str]:
    """A raw JSON list read as texts (each item as ``str`` gives it); empty for anything else."""
    return [str(v) for v in value] if isinstance(value, list) else []
