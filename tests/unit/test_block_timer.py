"""BlockTimer parses its options like marker keywords (pure: nothing is timed)."""

from __future__ import annotations

import pytest


def test_block_timer_parses_options_like_markers() -> None:
    from pytest_torchperf import BlockTimer, OptionError

    assert BlockTimer(min_time="0.5s").options.min_time == 0.5
    with pytest.raises(OptionError, match="unknown torchperf option 'min_tme'"):
        BlockTimer(min_tme=1)
