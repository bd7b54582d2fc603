"""torchao, which the int8 variant and ``torchperf_quantized_model`` need: the test extra installs
it (constraints-ci.txt pins it), but a machine's own torch may come without it (the H200 of
benchmarks/results/gpu-suite-h200-torch211.log: 12 of its 19 failures). Without it the plugin
skips int8 with the reason, so tests whose subject is int8 skip too, and the others expect that
skip. Asked when a test runs, not at import: importing torchao imports torch.
"""

from __future__ import annotations

import functools

import pytest


@functools.cache
def torchao_problem() -> str | None:
    """Why torchao cannot be imported here, or None where it can."""
    try:
        import torchao  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure: the plugin skips int8
        return f"{type(exc).__name__}: {exc}"
    return None


def skip_without_torchao() -> None:
    """Skip the calling test, with the reason, where torchao cannot be imported."""
    problem = torchao_problem()
    if problem is not None:
        pytest.skip(
            f"torchao is not importable ({problem}); the int8 variant needs it: "
            "pip install -c constraints-ci.txt -e '.[test]'"
        )


def with_int8_skipped(**outcomes: int) -> dict[str, int]:
    """pytester outcomes of a run with one int8 item that passes where torchao can be imported;
    elsewhere that item is skipped instead."""
    if torchao_problem() is None:
        return outcomes
    return {
        **outcomes,
        "passed": outcomes["passed"] - 1,
        "skipped": outcomes.get("skipped", 0) + 1,
    }
