"""Splitting perf tests over parallel processes (run/shards.py)."""

from __future__ import annotations

import pytest

from pytest_torchperf.run.shards import module_of, split_contiguous


def ids(*spec: tuple[str, int]) -> list[str]:
    return [f"tests/{module}.py::test_{i}" for module, count in spec for i in range(count)]


def test_module_of_strips_the_test_part() -> None:
    assert module_of("tests/test_a.py::Test::test_x[1-2]") == "tests/test_a.py"
    assert module_of("tests/test_a.py") == "tests/test_a.py"


def test_one_shard_or_one_test_keeps_everything_together() -> None:
    assert split_contiguous(ids(("a", 3)), 1) == [ids(("a", 3))]
    assert split_contiguous(ids(("a", 1)), 4) == [ids(("a", 1))]
    assert split_contiguous([], 3) == []


def test_shards_are_contiguous_cover_everything_and_are_never_empty() -> None:
    nodeids = ids(("a", 3), ("b", 5), ("c", 1), ("d", 7))
    for shards in range(1, 20):
        split = split_contiguous(nodeids, shards)
        assert [n for shard in split for n in shard] == nodeids
        assert all(split) and len(split) == min(shards, len(nodeids))


def test_cuts_at_a_module_boundary_one_test_from_the_middle() -> None:
    # The example project's shape: 2 + 4 + 4 tests; the middle (5) is inside module b, the
    # boundary after b (6) one test away: taken, so b's fixtures are built once.
    split = split_contiguous(ids(("a", 2), ("b", 4), ("c", 4)), 2)
    assert [len(s) for s in split] == [6, 4]


def test_cuts_inside_a_module_when_its_boundaries_are_far_from_even() -> None:
    split = split_contiguous(ids(("a", 1), ("b", 10), ("c", 1)), 2)
    assert [len(s) for s in split] == [6, 6]
    single = split_contiguous(ids(("a", 9)), 3)
    assert [len(s) for s in single] == [3, 3, 3]


def test_weights_move_the_cut() -> None:
    nodeids = ids(("a", 4))
    assert [len(s) for s in split_contiguous(nodeids, 2, [10, 1, 1, 1])] == [1, 3]
    assert [len(s) for s in split_contiguous(nodeids, 2, [0, 0, 0, 0])] == [2, 2]


def test_bad_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="shards must be >= 1"):
        split_contiguous(ids(("a", 2)), 0)
    with pytest.raises(ValueError, match="1 weights for 2 node ids"):
        split_contiguous(ids(("a", 2)), 2, [1.0])
    with pytest.raises(ValueError, match="negative"):
        split_contiguous(ids(("a", 2)), 2, [1.0, -1.0])
