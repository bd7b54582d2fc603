"""``torchperf accept`` of a run a guard refused the timing of (what it stores, what it says, the
timed sessions it must not replace), and ``torchperf compare`` of such a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_torchperf import cli
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.sessions import Session

ENV = "cpu-xeon-torch2.14.1-t1-deadbeef"
ENVIRONMENT = {"exact": {"device": "cpu", "threads": 1}, "soft": {"hostname": "box"}}
NODE = "tests/test_model.py::test_forward"
TIMES = [1e-3, 1.01e-3, 0.99e-3, 1e-3]
GATE = {"min_cpu_share": 0.9, "max_spread": 0.25, "max_neighbour_load": 0.5}


def results_file(tmp_path: Path, read: Path | None = None, **session: object) -> str:
    """A results file of one measurement (``fwd``) whose session holds ``session``'s keys, of
    a run that read the baseline folder ``read`` (the file records it)."""
    stored = {"statistic": 1e-3, "times": TIMES, "counters": {"flops": 10}, **session}
    section = {"nodeid": NODE, "measurement": "fwd", "environment_id": ENV, "session": stored}
    doc: dict = {
        "benchmarks": [{"name": "fwd", "stats": {"data": TIMES}, "torchperf": section}],
        "torchperf": {"format": "pytest-torchperf-results", "environments": {ENV: ENVIRONMENT}},
    }
    if read is not None:
        doc["torchperf"]["storage"] = {"path": str(read), "relative": read.name}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    return str(path)


def accept(tmp_path: Path, results: str, *flags: str) -> int:
    return cli.main(["accept", results, "--storage", str(tmp_path / "tp"), *flags])


def sessions(tmp_path: Path) -> list[Session]:
    return BaselineStore(tmp_path / "tp").load_sessions(ENV, NODE, "fwd")


def test_accept_stores_every_refusing_guards_option_and_no_untrusted_speedup(
    tmp_path, capsys
) -> None:
    """Accept stored only the first refusing guard's option, where a save stores every one's
    (storing the timing anyway needs them all), and kept a variant's speedup a results file
    cannot say was timed in rounds the guards passed."""
    busy = {"cpu_share": 0.5, "neighbour_load": 1.0, "gate": GATE, "variant": "compiled"}
    results = results_file(
        tmp_path, **busy, speedup={"median": 1.5, "p25": 1.4, "p75": 1.6, "n": 20}
    )
    assert accept(tmp_path, results) == 1
    [untimed] = sessions(tmp_path)
    assert untimed.statistic is None and untimed.untimed == "CPU share 0.50 < 0.90"
    assert untimed.untimed_options == (
        "--torchperf-min-cpu-share=0",
        "--torchperf-max-neighbour-load=100%",
    )
    assert untimed.speedup is None and untimed.counters == {"flops": 10}
    out = capsys.readouterr().out
    assert (
        f"fwd without its timing (CPU share 0.50 < 0.90) into {tmp_path / 'tp' / ENV}: its " in out
    )
    assert "its counters were stored\n" in out and "speedup" not in out  # what it kept, no more


def test_accept_says_it_kept_a_fallback_instruction_count(tmp_path, capsys) -> None:
    results = results_file(
        tmp_path,
        cpu_share=0.5,
        gate=GATE,
        instructions={"per_call": 5e6, "windows": [5e6, 5e6], "functions": {}},
        metric=0.5,
    )
    assert accept(tmp_path, results) == 1
    assert (
        "its counters, numerics and instruction count were stored: a --torchperf-fallback compare "
        "judges it by the count"
    ) in capsys.readouterr().out


def test_accept_reset_refuses_to_replace_timed_sessions_with_an_untimed_one(
    tmp_path, capsys
) -> None:
    """`accept --reset` of a busy run removed the earlier timed sessions and stored an untimed
    one, silently: the timing could no longer gate."""
    assert accept(tmp_path, results_file(tmp_path, gate=GATE)) == 0
    busy = results_file(tmp_path, cpu_share=0.5, gate=GATE)
    assert accept(tmp_path, busy, "--reset") == 1
    assert [s.statistic for s in sessions(tmp_path)] == [pytest.approx(1e-3)]  # untouched
    out = capsys.readouterr().out
    assert (
        f"{NODE} fwd: not accepted: a guard refused its timing (CPU share 0.50 < 0.90), and "
        f"--reset would replace its 1 timed session with one without timing, which cannot gate "
        f"its timing until a quiet save; accept it without --reset (its timed sessions stay), "
        f"or save it again on a quiet machine\n"
    ) in out
    assert "NOT accepted (see above): the stored baseline still differs from this run there" in out
    assert out.count("--force") == 1
    # --force stores the busy timing, as it always did.
    assert accept(tmp_path, busy, "--reset", "--force") == 0
    assert [s.cpu_share for s in sessions(tmp_path)] == [0.5]


def test_forcing_a_refused_timing_replaces_that_runs_untimed_session(tmp_path, capsys) -> None:
    """A busy run accepted as the tool said (without its timing), then with --force as the
    message offers, left two sessions of one run: one untimed, one timed."""
    assert accept(tmp_path, results_file(tmp_path, gate=GATE, run_id="0a0a0a0a0a0a")) == 0
    busy = results_file(tmp_path, cpu_share=0.5, gate=GATE, run_id="ebe82d5e5c1b")
    assert accept(tmp_path, busy) == 1
    assert [s.statistic is None for s in sessions(tmp_path)] == [False, True]
    assert accept(tmp_path, busy, "--force") == 0
    stored = sessions(tmp_path)
    assert [(s.run_id, s.cpu_share) for s in stored] == [
        ("0a0a0a0a0a0a", None),
        ("ebe82d5e5c1b", 0.5),
    ]
    assert stored[1].statistic is not None


def test_compare_says_a_strict_inconclusive_reason_once(tmp_path, capsys) -> None:
    """`torchperf compare` printed a strict inconclusive's ~500-character reason twice: as the
    verdict's message and again as the strict failure that repeats it."""
    assert accept(tmp_path, results_file(tmp_path, gate=GATE)) == 0
    busy = results_file(tmp_path, cpu_share=0.5, gate={**GATE, "strict": True})
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "tp"), busy]) == 1
    out = capsys.readouterr().out
    assert out.count("fwd: inconclusive") == 1 and "(failing: strict" in out, out
    # Its weak gate is the run's failure, as in the strict run, not a warning to use strict.
    assert "torchperf: run failed: timing was judged for only 0 of 1" in out, out
    assert "fails such a run" not in out, out


def test_compare_overrides_the_machine_guard_and_the_widening_bound(tmp_path, capsys) -> None:
    """docs/reports.md said `--max-slowdown` and the guard flags override the recorded options,
    but `torchperf compare` had no `--max-machine-slowdown`, `--min-gpu-clock` or
    `--max-widening`, though the replay honours those options too."""
    gate = {**GATE, "max_slowdown": 0.15, "max_machine_slowdown": 0.25, "max_widening": 3.0}
    kernel = {"calibration": 1e-4, "calibration_kernel": "k"}
    assert accept(tmp_path, results_file(tmp_path, gate=gate, **kernel)) == 0
    storage = str(tmp_path / "tp")
    # The calibration kernel ran twice as slow: the machine guard refuses the pass (+30 %: a
    # pass a slower machine disturbed that is within the limit passes).
    times = {"statistic": 1.3e-3, "times": [t * 1.3 for t in TIMES]}
    slower = results_file(tmp_path, gate=gate, **{**kernel, "calibration": 2e-4, **times})
    capsys.readouterr()
    assert cli.main(["compare", storage, slower]) == 0
    assert "1 slower machine (fwd)" in capsys.readouterr().out
    assert cli.main(["compare", storage, slower, "--max-machine-slowdown", "200%"]) == 1
    assert "torchperf: 1 fail\n" in capsys.readouterr().out
    # Within the limit on that slower machine: the machine only added time, so it passes.
    within = results_file(tmp_path, gate=gate, **{**kernel, "calibration": 2e-4})
    capsys.readouterr()
    assert cli.main(["compare", storage, within]) == 0
    assert "torchperf: 1 pass\n" in capsys.readouterr().out
    # Stored sessions too noisy to gate (one accepted at +165% anyway): no timing judged.
    for _ in range(3):
        assert accept(tmp_path, results_file(tmp_path, gate=gate, **kernel)) == 0
    slow = results_file(tmp_path, gate=gate, statistic=2.65e-3, **kernel)
    assert accept(tmp_path, slow, "--force") == 0
    results = results_file(tmp_path, gate=gate, **kernel)
    capsys.readouterr()
    assert cli.main(["compare", storage, results]) == 0
    assert "1 noisy baseline (fwd)" in capsys.readouterr().out
    assert cli.main(["compare", storage, results, "--max-widening", "off"]) == 0
    assert "torchperf: 1 pass\n" in capsys.readouterr().out
    assert cli.main(["compare", storage, results, "--min-gpu-clock", "0"]) == 0


def test_report_with_no_output_named_prints_the_markdown_summary(tmp_path, capsys) -> None:
    """`torchperf report results.json`, a look in the terminal: it said only to give --html or
    --markdown (exit 2)."""
    results = results_file(tmp_path)
    assert cli.main(["report", results]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## torchperf") and f"torchperf report of {results}" in out
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob("*.md"))


def test_an_html_report_of_a_results_file_shows_its_environment(tmp_path) -> None:
    """The HTML `torchperf report RESULTS --html` wrote had no environment fingerprint, where the
    run's own --torchperf-html had it: the file's environments were not given to the records."""
    results = results_file(tmp_path)
    (tmp_path / "b").mkdir()
    for files in ([results], [results, results_file(tmp_path / "b")]):
        page = tmp_path / "r.html"
        assert cli.main(["report", *files, "--html", str(page)]) == 0
        text = page.read_text()
        assert f"environment {ENV}" in text and "box" in text, files


def test_compare_replays_a_results_file_whose_save_stored_no_timing(tmp_path, capsys) -> None:
    """A run that compared and saved on a busy machine judged its own samples; its results file
    is replayed so, not skipped as a folder's untimed latest save is."""
    results = results_file(tmp_path, untimed="CPU share 0.50 < 0.90", gate=GATE)
    (tmp_path / "tp").mkdir()
    cli.main(["compare", str(tmp_path / "tp"), results])
    out = capsys.readouterr().out
    assert "not compared" not in out and "fwd" in out, out


def test_accept_refuses_to_append_a_changed_speed_that_leaves_no_gate(tmp_path, capsys) -> None:
    """`torchperf accept` (no --reset) of a +165% run appended it to 4 sessions of the old speed
    and said `accepted`, exit 0: the stored sessions then disagreed so much that every later
    compare judged no timing (a save that left them so fails). Another measurement of the same
    accept is still written; --reset makes the new speed the baseline."""
    gate = {**GATE, "max_slowdown": 0.15, "max_widening": 3.0}
    for _ in range(4):
        assert accept(tmp_path, results_file(tmp_path, gate=gate)) == 0
    slow = json.loads(Path(results_file(tmp_path, gate=gate, statistic=2.65e-3)).read_text())
    other = json.loads(json.dumps(slow["benchmarks"][0]))
    other["torchperf"]["measurement"] = other["name"] = "bwd"
    slow["benchmarks"].append(other)  # no sessions stored: it starts its baseline
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    capsys.readouterr()
    assert accept(tmp_path, str(tmp_path / "slow.json")) == 1
    assert [s.statistic for s in sessions(tmp_path)] == [pytest.approx(1e-3)] * 4  # untouched
    assert len(BaselineStore(tmp_path / "tp").load_sessions(ENV, NODE, "bwd")) == 1
    assert (
        f"{NODE} fwd: not accepted: its 4 stored sessions (p25 1 ms, baseline 1 ms) and this "
        f"run's (p25 2.65 ms, +165.0%) would disagree too much to gate: process noise 70.94% "
        f"widens the 15% limit to 212.81%, beyond the 45% allowed, so a compare would judge no "
        f"timing. A changed speed is accepted with --reset (this run's session replaces the "
        f"stored ones and becomes the baseline)\n"
    ) in capsys.readouterr().out
    # Where the stored sessions gated nothing already, a run at the usual speed is not blamed.
    assert accept(tmp_path, str(tmp_path / "slow.json"), "-k", "fwd", "--force") == 0
    capsys.readouterr()
    assert accept(tmp_path, results_file(tmp_path, gate=gate)) == 0, capsys.readouterr().out
    assert accept(tmp_path, str(tmp_path / "slow.json"), "-k", "fwd", "--reset") == 0
    assert [s.statistic for s in sessions(tmp_path)] == [pytest.approx(2.65e-3)]


def test_accept_without_storage_refuses_to_guess_when_the_run_read_another_folder(
    tmp_path, capsys, monkeypatch
) -> None:
    """A newcomer's run compared against --torchperf-storage=gbase; a bare `torchperf accept`
    wrote into the project's committed .torchperf, which that run never read."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gbase").mkdir()
    path = Path(results_file(tmp_path, read=tmp_path / "gbase", gate=GATE))
    doc = json.loads(path.read_text())
    assert cli.main(["accept", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"torchperf: {path} was judged against the baselines in {tmp_path / 'gbase'}, not "
        f".torchperf: give --storage {tmp_path / 'gbase'} (or --storage .torchperf to accept "
        f"into that folder anyway)\n"
    )
    assert not (tmp_path / ".torchperf").exists()
    assert cli.main(["accept", str(path), "--storage", "gbase"]) == 0
    assert BaselineStore(tmp_path / "gbase").load_sessions(ENV, NODE, "fwd")
    # A CI runner's run: its absolute path is not here; its folder within the project says.
    ci = "/home/runner/work/p/p"
    doc["torchperf"]["storage"] = {"path": f"{ci}/perf/baselines", "relative": "perf/baselines"}
    path.write_text(json.dumps(doc))
    assert cli.main(["accept", str(path)]) == 2
    assert "judged against the baselines in perf/baselines, not .torchperf" in (
        capsys.readouterr().err
    )
    # The folder it read is the default one, here or on the runner: the default, as before.
    for read in (
        {"path": str(tmp_path / ".torchperf")},
        {"path": f"{ci}/.torchperf", "relative": ".torchperf"},
    ):
        doc["torchperf"]["storage"] = read
        path.write_text(json.dumps(doc))
        assert cli.main(["accept", str(path)]) == 0
    assert len(BaselineStore(tmp_path / ".torchperf").load_sessions(ENV, NODE, "fwd")) == 2


def test_accept_appends_a_run_once(tmp_path, capsys) -> None:
    """Accepting the same results file twice (once whole, once with -k) appended its session
    twice: one run counted twice in the baseline's median and noise."""
    results = results_file(tmp_path, gate=GATE, run_id="89330950fca2")
    assert accept(tmp_path, results) == 0
    capsys.readouterr()
    assert accept(tmp_path, results, "-k", "fwd") == 0
    out = capsys.readouterr().out
    assert (
        f"{NODE} fwd: already stored (run 89330950fca2, accepted or saved before): nothing "
        f"appended (--reset makes it the only session)\n"
    ) in out
    assert "0 measurements accepted\n" in out
    assert len(sessions(tmp_path)) == 1
    # --force is for what a guard refused, not for counting a run twice.
    assert accept(tmp_path, results, "--force") == 0
    assert len(sessions(tmp_path)) == 1
    # --reset replaces the history with it, as asked.
    assert accept(tmp_path, results, "--reset") == 0
    assert len(sessions(tmp_path)) == 1
    # A session a save's fresh process stored (<run id>-p<k>) is that run's too.
    child = results_file(tmp_path, gate=GATE, run_id="5e55aa11-p2")
    assert accept(tmp_path, child) == 0
    capsys.readouterr()
    assert accept(tmp_path, results_file(tmp_path, gate=GATE, run_id="5e55aa11")) == 0
    assert "already stored (run 5e55aa11, " in capsys.readouterr().out
    assert len(sessions(tmp_path)) == 2


def test_accept_of_changed_code_needs_reset(tmp_path, capsys) -> None:
    """A run that failed on its counters (a new op) was appended to the old code's sessions:
    its time then read as process noise in the next compare and widened the limit."""
    gate = {**GATE, "max_slowdown": 0.15}
    assert accept(tmp_path, results_file(tmp_path, gate=gate)) == 0
    changed = results_file(tmp_path, gate=gate, counters={"flops": 12}, statistic=1.05e-3)
    capsys.readouterr()
    assert accept(tmp_path, changed) == 1
    assert (
        f"{NODE} fwd: not accepted: it differs from the stored sessions (FLOPs +20.0% "
        f"(10 -> 12)): it timed other code than they did, and appended its time would read as "
        f"noise and widen the limit; accept it with --reset (this run's session replaces the "
        f"stored ones)\n"
    ) in capsys.readouterr().out
    assert [s.statistic for s in sessions(tmp_path)] == [pytest.approx(1e-3)]
    # Counters that count no ops (a compiled variant's graphs) cannot tell: the outputs do.
    compiled = {"gate": gate, "counters": {"graphs": 1}, "accuracy_limits": {"rel_l2": 1e-5}}
    leaf = {"path": "out", "shape": [2], "l2": 1.0, "probe": [1.0, 0.0]}
    out, moved = {"leaves": [leaf]}, {"leaves": [{**leaf, "l2": 2.0, "probe": [2.0, 0.0]}]}
    assert accept(tmp_path, results_file(tmp_path, **compiled, fingerprint=out), "--reset") == 0
    capsys.readouterr()
    assert accept(tmp_path, results_file(tmp_path, **compiled, fingerprint=moved)) == 1
    assert "not accepted: it differs from the stored sessions (outputs moved by 1.00e+00" in (
        capsys.readouterr().out
    )
    accept(tmp_path, results_file(tmp_path, gate=gate, statistic=1e-3), "--reset")
    # Counters the test does not gate do not count.
    ignored = results_file(
        tmp_path, gate={**gate, "ignore_counters": ["flops"]}, counters={"flops": 12}
    )
    assert accept(tmp_path, ignored) == 0
    changed = results_file(tmp_path, gate=gate, counters={"flops": 12}, statistic=1.05e-3)
    assert accept(tmp_path, changed, "--reset") == 0
    assert [s.statistic for s in sessions(tmp_path)] == [pytest.approx(1.05e-3)]


def test_accept_into_a_missing_folder_the_run_did_not_read_is_refused(
    tmp_path, capsys, monkeypatch
) -> None:
    """`accept --storage nosuchdir` (a typo) created that folder and said `accepted`, exit 0,
    leaving the baselines the run read untouched."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".torchperf").mkdir()
    path = Path(results_file(tmp_path, read=tmp_path / ".torchperf", gate=GATE))
    assert cli.main(["accept", str(path), "--storage", "nosuchdir"]) == 2
    assert capsys.readouterr().err == (
        f"torchperf: baseline folder nosuchdir does not exist, and {path} was judged against the "
        f"baselines in {tmp_path / '.torchperf'}: give --storage {tmp_path / '.torchperf'}, or "
        f"create nosuchdir first to start a baseline folder there\n"
    )
    assert not (tmp_path / "nosuchdir").exists()
    # A CI runner's file: its absolute path is not here, its folder within the project is.
    ci = Path(results_file(tmp_path, read=Path("/home/runner/work/p/.torchperf"), gate=GATE))
    assert cli.main(["accept", str(ci), "--storage", "nosuchdir"]) == 2
    assert "judged against the baselines in .torchperf: give --storage .torchperf" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "nosuchdir").exists()
    (tmp_path / "nosuchdir").mkdir()  # meant: a new folder
    assert cli.main(["accept", str(path), "--storage", "nosuchdir"]) == 0


def test_a_k_that_matches_nothing_is_said_and_fails(tmp_path, capsys) -> None:
    """`compare ... -k nosuch` printed `nothing compared` and exited 0: in CI a misspelt -k
    turned the gate green. show and history said as little."""
    results = results_file(tmp_path, gate=GATE)
    assert accept(tmp_path, results) == 0
    capsys.readouterr()
    storage = str(tmp_path / "tp")
    said = (
        f"-k nosuch matches no measurement in {{where}} (it holds {NODE} fwd); -k matches a part "
        f"of a test id or a measurement's name\n"
    )
    assert cli.main(["compare", storage, results, "-k", "nosuch"]) == 1
    assert capsys.readouterr().err == "torchperf: " + said.format(where=results)
    assert cli.main(["show", storage, "-k", "nosuch"]) == 1
    assert capsys.readouterr().err == "torchperf: " + said.format(where=storage)
    assert cli.main(["history", results, "-k", "nosuch"]) == 1
    assert said.format(where=results) in capsys.readouterr().err
    # accept said only `0 measurements accepted (nothing timed matched -k nosuch)`, on stdout.
    assert accept(tmp_path, results, "-k", "nosuch") == 1
    assert capsys.readouterr() == ("", "torchperf: " + said.format(where=results))
    # It said `(torchperf list names its environments)`, not which they are.
    assert cli.main(["show", storage, "--env", "nosuch"]) == 1
    assert capsys.readouterr().err == (
        f"torchperf: no environment nosuch in {storage} (it holds {ENV}); --env takes a whole "
        f"environment id\n"
    )
    # A -k that matches still works.
    assert cli.main(["show", storage, "-k", "fwd"]) == 0
    assert cli.main(["compare", storage, results, "-k", "fwd"]) == 0


def test_compare_of_a_run_against_only_its_own_sessions_says_so(tmp_path, capsys) -> None:
    """After `accept results.json --reset`, `compare` of that file said `no baseline for this
    environment yet; record one with pytest --torchperf-save`: one was stored, the run's own."""
    results = results_file(tmp_path, gate=GATE, run_id="89330950fca2")
    assert accept(tmp_path, results, "--reset") == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "tp"), results]) == 0
    out = capsys.readouterr().out
    assert (
        "fwd: new: its 1 stored session is this run's own (saved or accepted from it), and a run "
        "is never judged against itself\n"
    ) in out
    assert "record one with pytest --torchperf-save" not in out


def test_compare_of_a_results_file_with_nothing_gated_exits_1_saying_so(tmp_path, capsys) -> None:
    """A compare that judged nothing said 'the lines above say why' where no line was printed
    (a --torchperf-disable run's file: no session in it)."""
    results = results_file(tmp_path)
    doc = json.loads(Path(results).read_text())
    del doc["benchmarks"][0]["torchperf"]["session"]
    Path(results).write_text(json.dumps(doc))
    (tmp_path / "tp").mkdir()
    assert cli.main(["compare", str(tmp_path / "tp"), results]) == 1
    assert "the candidate holds no gated measurement (a --torchperf-disable run" in (
        capsys.readouterr().err
    )


def test_the_replay_of_an_ab_run_is_not_told_to_run_ab_pairs(tmp_path, capsys) -> None:
    """The replay built its coverage records without the session, so an A/B run's kind was
    read as time: a measurement new in B was told to record baselines (an A/B run keeps none)."""
    gate = {**GATE, "kind": "ab", "ab": "rev:HEAD"}
    results = results_file(tmp_path, gate=gate, cpu_share=0.3)
    (tmp_path / "tp").mkdir()
    cli.main(["compare", str(tmp_path / "tp"), results])
    out = capsys.readouterr().out
    assert "Record baselines" not in out and ". ." not in out, out
    assert "this run did not gate their time. --torchperf-strict fails such a run" in out
