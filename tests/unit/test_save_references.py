"""What a save holds each process's machine speed against (run.saving.calibration_references)."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_torchperf.judge.samples import machine_disturbance
from pytest_torchperf.options.measure_options import MeasureOptions
from pytest_torchperf.run.saving import calibration_references, machine_why, save_guard


def _ctx(calibrations: list[float]) -> SimpleNamespace:
    # --torchperf-reset: no stored sessions are read, so no store is needed.
    return SimpleNamespace(settings=SimpleNamespace(reset=True), calibrations=calibrations)


def test_a_process_of_a_save_on_a_slower_machine_is_held_against_the_others() -> None:
    # Seen on the CI VM: a 5-process save whose kernel ran 4.5 us in three processes, 7.5 in two.
    processes = [7.66e-6, 7.52e-6, 4.46e-6, 4.50e-6, 4.53e-6]
    references = calibration_references(_ctx([]), "env", "t.py::t", "mlp", processes=processes)
    assert references[-1] == ("the median of this save's processes", processes)
    refused = [c for c in processes if machine_disturbance(c, references, 0.25)]
    assert refused == [7.66e-6, 7.52e-6]
    ratio, reference, what = machine_disturbance(7.66e-6, references, 0.25)
    assert what == "the median of this save's processes"
    assert reference == 4.53e-6 and round(ratio, 2) == 1.69


def test_a_save_mostly_on_the_slow_machine_keeps_the_slow_processes() -> None:
    # Four slow processes and one fast: the median is slow, nothing is clearly slower than it,
    # and the fast one is kept out (a baseline of both speeds would disagree with itself).
    processes = [7.6e-6, 7.5e-6, 7.4e-6, 7.7e-6, 4.5e-6]
    references = calibration_references(_ctx([]), "env", "t.py::t", "mlp", processes=processes)
    assert not [c for c in processes if machine_disturbance(c, references, 0.25)]
    unfit = save_guard(MeasureOptions(), references)
    refused = {c: unfit(SimpleNamespace(calibration=c)) for c in processes}
    assert [c for c, why in refused.items() if why] == [4.5e-6]
    ratio, median, what = refused[4.5e-6]
    assert (round(ratio, 2), median, what) == (0.6, 7.5e-6, "the median of this save's processes")
    assert machine_why(ratio, what) == "machine -40.0% vs the median of this save's processes"


def test_a_newcomers_save_at_two_speeds_keeps_one() -> None:
    # A fresh-clone save beside other work: two processes at 4.7-4.9 us, three at 7.8-8.1 us
    # (one of them refused by a guard still ran at that speed); stored together they widened a
    # 10 % limit to 124 %. Now the save keeps the three slow ones' speed only.
    processes = [4.69e-6, 4.87e-6, 7.79e-6, 8.1e-6, 7.95e-6]
    references = calibration_references(_ctx([]), "env", "t.py::t", "m", processes=processes)
    unfit = save_guard(MeasureOptions(), references)
    kept = [c for c in processes if not unfit(SimpleNamespace(calibration=c))]
    assert kept == [7.79e-6, 8.1e-6, 7.95e-6]


def test_one_process_adds_no_reference() -> None:
    references = calibration_references(_ctx([5e-6]), "env", "t.py::t", "mlp", processes=[5e-6])
    assert [what for what, _ in references] == ["this run's other measurements"]
    assert calibration_references(_ctx([]), "env", "t.py::t", "mlp", processes=[None, None]) == [
        ("this run's other measurements", [])
    ]
