"""What a Result without timing says of itself (run/result.py)."""

from __future__ import annotations

import pytest

from pytest_torchperf.run.result import Result


def _untimed(**fields: object) -> Result:
    return Result(
        name="m[amp]",
        nodeid="t.py::test_m",
        samples=[],
        number_per_block=0,
        device="cpu",
        threads=1,
        cpu_share=None,
        **fields,  # type: ignore[arg-type]
    )


def test_an_untimed_result_says_why_it_has_no_timing() -> None:
    """A variant that failed on NaN outputs said `not timed (--torchperf-disable)` in a run
    without that flag, in its repr and when its median was read."""
    assert "not timed (--torchperf-disable)" in repr(_untimed(disabled=True))
    failed = _untimed(failures=["m[amp]: 40 NaN/inf of 40 values"])
    assert repr(failed) == (
        "<torchperf Result 'm[amp]': not timed: it failed first (m[amp]: 40 NaN/inf of 40 values)>"
    )
    with pytest.raises(ValueError, match="was not timed: it failed first"):
        _ = failed.median
    assert "--torchperf-disable" not in repr(_untimed())
