"""Splitting perf tests over parallel processes (kinds/instructions/run_job_split.py)."""

from __future__ import annotations

import pytest

from pytest_torchperf.kinds.instructions.run_job_split import module_of, split_contiguous


def ids(*spec: tuple[str, int]) -> list[str]:
    return [f"tests/{module}.py::test_{i}" for module, count in spec for i in range(count)]


def test_module_of_strips_the_test_part() -> None:
    assert module_of("tests/test_a.py::Test::test_x[1-2]") == "tests/test_a.py"
    assert module_of("tests/test_a.py") == "tests/test_a.py"


def test_one_job_or_one_test_keeps_everything_together() -> None:
    assert split_contiguous(ids(("a", 3)), 1) == [ids(("a", 3))]
    assert split_contiguous(ids(("a", 1)), 4) == [ids(("a", 1))]
    assert split_contiguous([], 3) == []


def test_slices_are_contiguous_cover_everything_and_are_never_empty() -> None:
    nodeids = ids(("a", 3), ("b", 5), ("c", 1), ("d", 7))
    for jobs in range(1, 20):
        split = split_contiguous(nodeids, jobs)
        assert [n for part in split for n in part] == nodeids
        assert all(split) and len(split) == min(jobs, len(nodeids))


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
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        split_contiguous(ids(("a", 2)), 0)
    with pytest.raises(ValueError, match="1 weights for 2 node ids"):
        split_contiguous(ids(("a", 2)), 2, [1.0])
    with pytest.raises(ValueError, match="negative"):
        split_contiguous(ids(("a", 2)), 2, [1.0, -1.0])


# -- how many counting processes ``auto`` starts -----------------------------------------------


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """A fake machine: CPUs in the affinity mask, MemAvailable, and a cgroup folder."""
    from pytest_torchperf.kinds.instructions import run_job_split as job_split

    def set_machine(cpus: int, available_gib: float | None, cgroup: dict[str, str] | None = None):
        monkeypatch.setattr(job_split.os, "sched_getaffinity", lambda _: set(range(cpus)))
        meminfo = tmp_path / "meminfo"
        if available_gib is None:
            meminfo.write_text("MemTotal: 1 kB\n")
        else:
            meminfo.write_text(f"MemAvailable: {int(available_gib * 2**20)} kB\n")
        real_open = open
        monkeypatch.setattr(
            job_split,
            "open",
            lambda path, *a, **k: real_open(meminfo if path == "/proc/meminfo" else path, *a, **k),
            raising=False,
        )
        folder = tmp_path / "cgroup"
        folder.mkdir(exist_ok=True)
        for name, text in (cgroup or {}).items():
            (folder / name).write_text(text)
        monkeypatch.setattr(job_split, "CGROUP", folder)
        return job_split.auto_jobs()

    return set_machine


def test_auto_is_one_process_per_cpu_at_most_four(machine) -> None:
    assert machine(2, 20.0) == 2
    assert machine(16, 64.0) == 4
    assert machine(1, 64.0) == 1


def test_auto_fits_the_available_memory_at_3_gib_each_and_never_goes_below_one(machine) -> None:
    assert machine(4, 7.0) == 2
    assert machine(4, 1.0) == 1
    assert machine(4, None) == 4  # no MemAvailable line: CPUs decide


def test_auto_obeys_a_containers_cpu_quota_and_memory_limit(machine) -> None:
    quota = {"cpu.max": "150000 100000\n"}  # 1.5 CPUs
    assert machine(16, 64.0, quota) == 2
    assert machine(16, 64.0, {"cpu.max": "max 100000\n"}) == 4
    limited = {"memory.max": str(8 * 2**30), "memory.current": str(1 * 2**30)}
    assert machine(16, 64.0, limited) == 2  # 7 GiB left in the container
    assert machine(16, 64.0, {"memory.max": "max\n"}) == 4
