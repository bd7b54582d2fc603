"""What the user wrote that the plugin does not know, refused with the closest known spelling:
a ``--torchperf-*`` option on the command line (or in ``addopts``) and a ``torchperf_*`` ini key.
pytest's own messages name neither the closest option (``unrecognized arguments:
--torchperf-comapre``) nor an unknown key beyond a warning, after which the setting meant silently
keeps its default. No torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from difflib import get_close_matches

import pytest

from pytest_torchperf.pytest_plugin import options

PREFIX = "--torchperf-"


def check_flags(parser: pytest.Parser, args: Sequence[str]) -> None:
    """Refuse a misspelt ``--torchperf-*`` option among ``args`` (the command line with
    ``addopts`` and ``PYTEST_ADDOPTS``), naming the option meant, so the user reads this
    rather than pytest's bare ``unrecognized arguments``. Only a word no plugin or conftest
    registered (``parser``: every option so far) and close to one of this plugin's is refused;
    pytest reports the rest as it always does."""
    if not any(word.startswith(PREFIX) for word in args):  # most runs: nothing to parse
        return
    try:
        _, unknown = parser.parse_known_and_unknown_args(list(args))
    except pytest.UsageError:  # a bad value of a known option: pytest says so itself
        return
    known = options.flags()
    # Compared after the prefix, which would make every name look close.
    names = {name.removeprefix(PREFIX): name for name in known}
    lines = []
    for word in unknown:
        spelt = word.split("=", 1)[0]
        if not spelt.startswith(PREFIX) or spelt in known:
            continue
        close = get_close_matches(spelt.removeprefix(PREFIX), list(names), n=1)
        if close:  # said with the value given, ready to paste
            meant = names[close[0]] + word[len(spelt) :]
            lines.append(f"torchperf: unknown option {word}. Did you mean {meant}?")
    if lines:
        raise pytest.UsageError(
            "\n".join([*lines, "(pytest --help lists the torchperf options with their meaning)"])
        )


def _ini_file_keys(config: pytest.Config) -> list[str]:
    """The keys the ini file (and ``-o``) set. pytest 9 deprecated ``Config.inicfg`` (a warning
    in every run that reads it) and offers no public list of them; its own unknown-key check
    reads ``_inicfg``, so that is read where it exists, ``inicfg`` before pytest 9, and nothing
    (no check) where neither does."""
    keys = getattr(config, "_inicfg", None)
    if keys is None and not hasattr(type(config), "inicfg"):  # an attribute before pytest 9
        keys = getattr(config, "inicfg", None)
    return list(keys) if isinstance(keys, Mapping) else []


def check_ini_keys(config: pytest.Config) -> None:
    """Refuse an unknown ``torchperf_*`` ini key, naming the closest known one, as an unknown
    marker keyword is refused: pytest itself only warns ``Unknown config option``, and the
    setting the user meant silently keeps its default."""
    unknown = []
    for key in _ini_file_keys(config):
        if key.startswith("torchperf_"):
            try:
                config.getini(key)
            except ValueError:  # not registered by this plugin or its kinds
                unknown.append(key)
            except TypeError:  # registered; a TOML value of another type: read by ini_value
                pass
    if not unknown:
        return
    known = sorted(f"torchperf_{name}" for name in options.ini_keys())
    overrides = [o.split("=", 1)[0].strip() for o in config.getoption("override_ini") or ()]
    lines = []  # every unknown key at once, as every bad marker is named at once
    for key in unknown:
        close = get_close_matches(key, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        where = (
            " in -o/--override-ini"
            if key in overrides
            else f" in {config.inipath}"
            if config.inipath
            else ""
        )
        lines.append(f"torchperf: unknown ini key {key!r}{where}.{hint}")
    raise pytest.UsageError(
        "\n".join(lines) + f" Known torchperf keys: {', '.join(known)} (pytest --help lists "
        f"them with their meaning)."
    )
