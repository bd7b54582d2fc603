"""The user-input error shared by the option parsers (no torch, no pytest)."""

from __future__ import annotations


class OptionError(ValueError):
    """A user-supplied option value or keyword is invalid; the message names it and the fix."""
