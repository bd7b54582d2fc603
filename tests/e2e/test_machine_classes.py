"""Baselines from another CPU class: which counters gate, which are only reported; strict mode and
measurements without a baseline; "new" reasons said once per environment.

The other machine is faked by editing the stored environment's ISA flags (both directions: more
and fewer flags than this machine has) and its stored counters: no test depends on the CPU it
runs on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import edit_baselines, scale_baselines

PROJECT = """
import torch

def test_fp32(torchperf):
    torchperf(torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()), torch.randn(4, 32),
              name="fp32")

def bf16_matmul(x, w):
    return (x.to(torch.bfloat16) @ w.to(torch.bfloat16)).float()

def test_bf16(torchperf):
    torchperf(bf16_matmul, torch.randn(4, 32), torch.randn(32, 32), name="bf16")
"""


def _other_cpu_class(storage: Path, direction: str) -> tuple[str, str]:
    """Move the stored environment to a fake CPU class with more or fewer ISA flags than here."""
    [env_dir] = [p for p in storage.iterdir() if p.is_dir()]
    env_file = env_dir / "environment.json"
    env = json.loads(env_file.read_text())
    here = env["exact"]["cpu_isa"] or ""
    flags = [f for f in here.split(",") if f]
    env["exact"]["cpu_isa"] = (
        ",".join([*flags, "amx_fp16"]) if direction == "more" else ",".join(flags[:1])
    )
    env_file.write_text(json.dumps(env))
    other = env_dir.with_name(f"cpu-otherclass-{direction}-0000beef")
    env_dir.rename(other)
    return other.name, env["exact"]["cpu_isa"]


def _other_class_counted_other_ops(_nodeid: str, _name: str, session: dict) -> None:
    """What the other class's torch counted: one op more (as int8/bf16 decompositions differ).
    Its time: 100x this machine's, so the normalised time is a note whatever this machine's load
    (unchanged code read 85 % slower beside a busy neighbour and warned)."""
    session["counters"]["ops"]["aten::sub_"] = 3
    session["statistic"] *= 100


@pytest.mark.parametrize("direction", ["more", "fewer"])
def test_another_cpu_class_gates_fp32_counters_and_reports_low_precision_ones(
    perf: pytest.Pytester, direction: str
) -> None:
    perf.makepyfile(PROJECT)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    storage = perf.path / ".torchperf"
    other, isa = _other_cpu_class(storage, direction)
    edit_baselines(storage, _other_class_counted_other_ops)

    result = perf.runpytest("--torchperf-compare", "--torchperf-cross-machine", "-rf")
    # fp32 code counts the same ops on every CPU class: a difference is a real change.
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            f"*fp32: counters changed vs baseline: ops changed: removed aten::sub_ x3 (vs {other}, "
            f"same torch build)*"
        ]
    )
    # What was compared is said: the summary counted the counters as not gated ("no baseline")
    # and said nothing was compared, beside the very counter failure above. The normalised
    # time of unchanged code is a note, not a warning (it warns only beyond 50 % slower).
    result.stdout.fnmatch_lines(
        [
            f"*--torchperf-cross-machine compared with {other} instead: counters gated (same "
            f"torch build), time only a hint; record * for this environment with *",
            "torchperf: compared 2 measurements: timing judged for 0 of 2, counters 2 of 2, *",
        ]
    )
    # Each measurement's note, or one note for both where their figures round alike (then it
    # comes first: "note for 2 measurements (...): cross-machine: time -99% ...").
    result.stdout.fnmatch_lines(
        ["*note*cross-machine: time *% vs the baseline of * a hint, not judged *"]
    )
    assert "TorchperfWarning: fp32: cross-machine" not in result.stdout.str()
    # bf16 code's ops depend on the CPU class: reported with the reason, not failed.
    text = result.stdout.str()
    assert "::test_bf16 - " not in text and "bf16: counters changed" not in text
    result.stdout.fnmatch_lines(
        [
            f"*bf16*note: not gated: ops changed: removed aten::sub_ x3 vs {other}: this measurement "
            f"runs low-precision or quantized code*the CPU class differs (cpu_isa * here vs {isa} "
            f"stored)*"
        ]
    )

    # Parameters are the model's own on any CPU class: gated for low-precision code too.
    def other_params(_nodeid: str, name: str, session: dict) -> None:
        session["counters"]["ops"].pop("aten::sub_", None)
        if name == "bf16":
            session["counters"]["params"] = 99

    edit_baselines(storage, other_params)
    params = perf.runpytest("--torchperf-compare", "--torchperf-cross-machine")
    params.assert_outcomes(failed=1, passed=1)
    params.stdout.fnmatch_lines(
        [
            f"*bf16: counters changed vs baseline: parameters 99 -> 0 *"
            f"(vs {other}, same torch build)*"
        ]
    )


def test_strict_fails_a_measurement_without_a_baseline_naming_folder_and_environment(
    perf: pytest.Pytester,
) -> None:
    perf.makepyfile(PROJECT)
    typo = perf.path / ".torchperff"
    result = perf.runpytest(
        "--torchperf-compare", "--torchperf-strict", "--torchperf-storage", str(typo)
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*fp32: no baseline: the storage folder .torchperff does not exist. Is "
            "--torchperf-storage misspelt, or were the baselines never committed? Point "
            "--torchperf-storage at the folder that holds them, or record them with pytest "
            "--torchperf-save and commit the folder (failing: --torchperf-strict)"
        ]
    )
    # Without --torchperf-strict the run passes, and says once for both that the folder is
    # missing.
    lenient = perf.runpytest("--torchperf-compare", "--torchperf-storage", str(typo))
    lenient.assert_outcomes(passed=2)
    lenient.stdout.fnmatch_lines(
        [
            "2 measurements (*bf16, *fp32): no baseline: the storage folder .torchperff does not "
            "exist. Is --torchperf-storage*"
        ]
    )
    # A folder that exists but lacks this measurement: the file it looked for (its folder names
    # the environment), relative to the working folder as git add takes it.
    typo.mkdir()
    result = perf.runpytest(
        "--torchperf-compare", "--torchperf-strict", "--torchperf-storage", str(typo)
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "fp32: no baseline in .torchperff/cpu-*/test_strict_fails_a_measurement*.json: record "
            "one with pytest --torchperf-save and commit it (git add .torchperff), or point "
            "--torchperf-storage at the folder that holds it (failing: --torchperf-strict)",
            "*::test_bf16: bf16: no baseline in .torchperff/cpu-*.json, failing: --torchperf-strict",
            "*::test_fp32: fp32: no baseline in .torchperff/cpu-*.json, failing: --torchperf-strict",
        ]
    )
    # The summary says it once, in a few words: "no baseline for this environment yet; record
    # one ..." came before it.
    summary = result.stdout.str().split("= torchperf =")[1].split("short test summary")[0]
    assert "record one" not in summary and summary.count("no baseline in") == 2, summary
    # Without strict: new, passing, as before.
    perf.runpytest("--torchperf-compare", "--torchperf-storage", str(typo)).assert_outcomes(
        passed=2
    )
    # A run that saves is creating the baseline: strict does not fail it.
    saving = perf.runpytest("--torchperf-compare", "--torchperf-save", "--torchperf-strict")
    saving.assert_outcomes(passed=2)
    scale_baselines(perf.path / ".torchperf", 100.0)  # no timing verdict can fail under strict
    perf.runpytest("--torchperf-compare", "--torchperf-strict").assert_outcomes(passed=2)


def test_new_measurements_of_one_other_environment_share_one_reason_line(
    perf: pytest.Pytester,
) -> None:
    perf.makepyfile(PROJECT)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    other, _ = _other_cpu_class(perf.path / ".torchperf", "fewer")
    result = perf.runpytest("--torchperf-compare")
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert text.count("no comparable baseline") == 1, text
    result.stdout.fnmatch_lines(
        [
            f"no comparable baseline for 2 measurements (*bf16, *fp32): cpu_isa * here vs * stored "
            f"(stored under *{other}); record them for this environment with pytest --torchperf-save"
        ]
    )


def test_cross_machine_leaves_a_baseline_stored_here_without_timing_as_it_is(
    perf: pytest.Pytester,
) -> None:
    """Review: a save that stored no timing here (spread refused it) left a `new (no timing
    baseline)` verdict, which --torchperf-cross-machine rewrote into `no comparable baseline:
    ...; compared with <this very environment> instead`, dropping the option that stores it."""
    perf.makepyfile(PROJECT)
    perf.runpytest("--torchperf-save", "-k", "fp32", "--torchperf-max-spread=0.0001%")
    result = perf.runpytest("--torchperf-compare", "--torchperf-cross-machine", "-k", "fp32")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*fp32: no timing baseline: the save could not time it (spread *); its counters and "
            "numerics were gated against the 1 stored session. * --torchperf-max-spread *"
        ]
    )
    assert "--torchperf-cross-machine compared with" not in result.stdout.str()
