"""The plugin's side of the hooks other plugins implement (:mod:`.hookspecs`): calling them and
checking what they return, so a bad extension fails with a message that names it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_torchperf.run.context import RunContext
from pytest_torchperf.store.record import Record

#: JSON scalars: what a fingerprint field may hold.
_SCALARS = (str, int, float, bool, type(None))


def attach_environment_hook(config: pytest.Config, ctx: RunContext) -> None:
    """Let ``pytest_torchperf_environment`` implementations add exact fingerprint fields."""
    from pytest_torchperf.store.environment import EXACT_FIELDS

    def extra(device: str, threads: int) -> Mapping[str, Any]:
        fields: dict[str, Any] = {}
        for added in config.hook.pytest_torchperf_environment(
            config=config, device=device, threads=threads
        ):
            if added is None:
                continue
            if not isinstance(added, Mapping):
                raise TypeError(
                    f"torchperf: a pytest_torchperf_environment hook returned "
                    f"{type(added).__name__}, expected a dict of extra fingerprint fields or None"
                )
            for key, value in added.items():
                if not isinstance(key, str) or key in EXACT_FIELDS:
                    raise ValueError(
                        f"torchperf: a pytest_torchperf_environment hook returned the field "
                        f"{key!r}: fields must be strings that the plugin does not fingerprint "
                        f"itself ({', '.join(EXACT_FIELDS)}); rename it"
                    )
                if not isinstance(value, _SCALARS):
                    raise ValueError(
                        f"torchperf: a pytest_torchperf_environment hook returned "
                        f"{key}={value!r}: values must be strings, numbers, booleans or None"
                    )
                fields[key] = value
        return fields

    ctx.extra_fingerprint = extra


def register_kinds(config: pytest.Config) -> None:
    """Register the measurement kinds ``pytest_torchperf_kinds`` implementations add."""
    from pytest_torchperf.kinds import KindSpec, forget_added, register

    forget_added()
    for added in config.hook.pytest_torchperf_kinds(config=config):
        for spec in added or ():
            if not isinstance(spec, KindSpec):
                raise pytest.UsageError(
                    f"torchperf: a pytest_torchperf_kinds hook returned {spec!r}: it must return "
                    f"pytest_torchperf.kinds.KindSpec objects (or None)"
                )
            try:
                register(spec)
            except ValueError as exc:
                raise pytest.UsageError(f"torchperf: pytest_torchperf_kinds: {exc}") from None


def report_lines(config: pytest.Config, records: Sequence[Record]) -> list[str]:
    """The lines ``pytest_torchperf_report`` implementations add to the terminal summary: they
    get the records' JSON form (a hook's payload stays plain dicts)."""
    lines: list[str] = []
    payload = [record.to_json() for record in records]
    for added in config.hook.pytest_torchperf_report(config=config, records=payload):
        lines += [str(line) for line in added or ()]
    return lines
