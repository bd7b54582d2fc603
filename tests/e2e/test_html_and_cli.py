"""End-to-end tests of the HTML report and of the ``torchperf`` command over real runs' files."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from pytest_torchperf import cli, load_results
from tests import browser
from tests.e2e.helpers import scale_baselines

MODELS = """
import torch

def test_mlp(torchperf):
    torchperf(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()), torch.randn(8, 64),
              name="mlp")

def test_conv(torchperf):
    torchperf(torch.nn.Conv2d(3, 4, 3), torch.randn(1, 3, 16, 16), name="conv")
"""


@pytest.fixture
def regressed_run(perf: pytest.Pytester) -> pytest.Pytester:
    """Baselines saved twice, the mlp's made 100x faster, then a compare run writing all reports."""
    perf.makepyfile(MODELS)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    perf.runpytest("--torchperf-save").assert_outcomes(passed=2)
    scale_baselines(perf.path / ".torchperf", 0.01, name="mlp")
    result = perf.runpytest(
        "--torchperf-compare",
        "--torchperf-max-slowdown=500%",
        "--torchperf-html",
        "reports/report.html",
        "--torchperf-json",
        "reports/results.json",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["torchperf: HTML report written to *reports/report.html"])
    return perf


def test_html_report_shows_failure_first_with_history_and_trace(
    regressed_run: pytest.Pytester,
) -> None:
    page = (regressed_run.path / "reports" / "report.html").read_text()
    assert "<h1>torchperf report: 1 fail, 1 pass</h1>" in page
    attention = page.split("<h2>Needs attention</h2>", 1)[1].split("<h2>", 1)[0]
    assert "mlp: " in attention and "slower than baseline" in attention
    first_row = page.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert ">mlp<" in first_row and "fail" in first_row
    assert first_row.count("<circle") == 3  # two stored sessions + this run
    # The regression was profiled; its trace is linked relative to the report and exists.
    href = page.split("Profiler traces of this run", 1)[1].split('href="', 1)[1].split('"', 1)[0]
    assert (regressed_run.path / "reports" / href).resolve().is_file()


def test_cli_compare_gives_the_plugins_verdicts(
    regressed_run: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    path = regressed_run.path
    plugin = {
        b["torchperf"]["measurement"]: b["torchperf"]["outcome"]
        for b in json.loads((path / "reports" / "results.json").read_text())["benchmarks"]
    }
    assert plugin == {"mlp": "fail", "conv": "pass"}
    code = cli.main(
        [
            "compare",
            str(path / ".torchperf"),
            str(path / "reports" / "results.json"),
            "--max-slowdown",
            "500%",
            "--min-cpu-share",
            "0",
            "--max-spread",
            "1000%",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    rows = {line.split()[1]: line.split()[2] for line in out.splitlines() if "::test_" in line}
    assert rows == plugin
    assert "mlp: " in out and "slower than baseline" in out
    assert out.rstrip().endswith(
        "torchperf: 1 fail, 1 pass\n"
        "torchperf: gated 2 measurements: timing judged for 2 of 2, counters 2 of 2, "
        "numerics 2 of 2"
    )


def test_cli_accept_then_compare_passes(
    regressed_run: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    path = regressed_run.path
    results = str(path / "reports" / "results.json")
    assert (
        cli.main(["accept", results, "--storage", str(path / ".torchperf"), "-k", "mlp", "--reset"])
        == 0
    )
    out = capsys.readouterr().out
    assert "torchperf: 1 measurement accepted" in out and "::test_mlp mlp" in out
    # The slower timing is now the baseline: the same gate passes.
    assert (
        cli.main(
            [
                "compare",
                str(path / ".torchperf"),
                results,
                "--max-slowdown",
                "500%",
                "--min-cpu-share",
                "0",
                "--max-spread",
                "1000%",
            ]
        )
        == 0
    )
    regressed_run.runpytest("--torchperf-compare", "--torchperf-max-slowdown=500%").assert_outcomes(
        passed=2
    )
    assert (
        cli.main(["accept", results, "--storage", str(path / ".torchperf"), "-k", "nothing"]) == 1
    )


def test_cli_accept_refusal_is_a_nonzero_exit_and_force_overrides(
    regressed_run: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A matched measurement the save guard refuses must not look like success to a CI script."""
    import json

    path = regressed_run.path
    results = path / "reports" / "results.json"
    doc = json.loads(results.read_text())
    for bench in doc["benchmarks"]:
        if bench["torchperf"]["measurement"] == "mlp":
            session = bench["torchperf"]["session"]
            session["cpu_share"] = 0.3  # contended while measuring, under the default guard
            session["gate"]["min_cpu_share"] = 0.9
    results.write_text(json.dumps(doc))
    code = cli.main(["accept", str(results), "--storage", str(path / ".torchperf"), "-k", "test_"])
    out = capsys.readouterr().out
    assert code == 1
    assert "mlp: not accepted: CPU share 0.30 < 0.90" in out
    assert "1 measurement accepted" in out and "1 matching measurement NOT accepted" in out
    # Only the refused one selected: it matched, so "nothing matched" would contradict it.
    code = cli.main(["accept", str(results), "--storage", str(path / ".torchperf"), "-k", "mlp"])
    out = capsys.readouterr().out
    assert code == 1 and "0 measurements accepted" in out and "nothing timed matched" not in out
    assert "1 matching measurement NOT accepted" in out
    assert (
        cli.main(
            [
                "accept",
                str(results),
                "--storage",
                str(path / ".torchperf"),
                "-k",
                "test_mlp",
                "--force",
            ]
        )
        == 0
    )


def test_cli_list_show_report_and_load_results(
    regressed_run: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = regressed_run.path / ".torchperf"
    assert cli.main(["list", "--storage", str(storage)]) == 0
    listed = capsys.readouterr().out
    assert "cpu-" in listed and "measurements" in listed
    header, row = listed.splitlines()[:2]
    columns = dict(zip(header.split(), row.split(), strict=False))
    assert columns["tests"] == "2" and columns["measurements"] == "2" and columns["sessions"] == "4"
    assert columns["mode"] == "time"
    assert cli.main(["show", "--storage", str(storage), "-k", "conv"]) == 0
    shown = capsys.readouterr().out
    assert "::test_conv" in shown and "::test_mlp" not in shown
    assert re.search(r"\d (ms|us|s) p25", shown) and "instr/call" not in shown, shown
    html = regressed_run.path / "out" / "stored.html"
    assert cli.main(["report", "--storage", str(storage), "--html", str(html)]) == 0
    assert "torchperf report" in html.read_text()
    frame = load_results(storage)
    assert len(frame) == 4 and set(frame["name"]) == {"mlp", "conv"}  # 2 sessions each
    assert {"median_s", "p25_s", "speedup", "rel_l2", "flops", "timestamp"} <= set(frame.columns)
    run = load_results(regressed_run.path / "reports" / "results.json")
    assert dict(zip(run["name"], run["outcome"], strict=False)) == {"mlp": "fail", "conv": "pass"}
    bad = regressed_run.path / "bad.json"
    bad.write_text("{}")
    assert cli.main(["compare", str(storage), str(bad)]) == 2
    assert "not written by pytest-torchperf" in capsys.readouterr().err


@pytest.mark.skipif(
    browser.chromium() is None,
    reason="no Chromium/Chrome binary on PATH (Debian: apt-get install chromium)",
)
def test_html_report_renders_in_headless_chromium(
    regressed_run: pytest.Pytester, tmp_path: Path
) -> None:
    shot = tmp_path / "report.png"
    dom, console = browser.render(regressed_run.path / "reports" / "report.html", shot)
    assert console == []
    assert 'data-ready="1"' in dom  # the page's script ran to the end
    assert dom.count('-row"') == 2 and dom.count("<svg") >= 4  # the two measurements
    # Pixels: the fail badge's red background, the pass badge's green and the blue box plots.
    assert browser.colour_pixels(shot, (0xFE, 0xE2, 0xE2), 4) > 200
    assert browser.colour_pixels(shot, (0xDC, 0xFC, 0xE7), 4) > 200
    blue = browser.bluish_pixels(shot)
    assert blue > 150, blue  # box plots and trend dots


@pytest.mark.skipif(
    browser.chromium() is None,
    reason="no Chromium/Chrome binary on PATH (Debian: apt-get install chromium)",
)
@pytest.mark.parametrize("width", [1280, 1920])
def test_html_report_fits_the_screen_without_horizontal_scrolling(
    regressed_run: pytest.Pytester, tmp_path: Path, width: int
) -> None:
    """At 1280 px the plots are on screen (secondary columns collapse); at 1920 px all columns
    are. A copy of the page reports its own overflow (scrollWidth beyond the window)."""
    page = tmp_path / "report.html"
    page.write_text(
        (regressed_run.path / "reports" / "report.html")
        .read_text()
        .replace(
            "</body>",
            "<script>var r=document.getElementById('results').getBoundingClientRect();"
            "document.body.dataset.overflow=document.documentElement.scrollWidth-window.innerWidth;"
            "document.body.dataset.tableRight=Math.round(r.right);"
            "document.body.dataset.flops=getComputedStyle(document.querySelector('th[data-sec]'))"
            ".display;</script></body>",
        )
    )
    dom, console = browser.render(page, tmp_path / "report.png", width=width, height=900)
    assert console == []
    overflow = int(re.search(r'data-overflow="(-?\d+)"', dom).group(1))
    assert overflow <= 0, f"{overflow} px wider than a {width} px window"
    right = int(re.search(r'data-table-right="(\d+)"', dom).group(1))
    assert right <= width, right
    flops = re.search(r'data-flops="([\w-]+)"', dom).group(1)
    assert flops == ("none" if width < 1600 else "table-cell"), flops


def _console_script() -> str | None:
    """The installed `torchperf` command: next to this interpreter (a venv's bin/, which is on
    PATH only while the venv is activated), in its scripts folder, or on PATH."""
    import shutil
    import sysconfig

    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (folder / "torchperf").is_file():
            return str(folder / "torchperf")
    return shutil.which("torchperf")


def test_console_script_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's install command installs the `torchperf` command (pyproject [project.scripts])."""
    import subprocess

    # `python -m pytest` with a venv's python that is not activated: its bin/ is not on PATH.
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    script = _console_script()
    assert script, (
        f"the torchperf console script is neither next to {sys.executable} nor in "
        f"{__import__('sysconfig').get_path('scripts')}: pip install -e . installs it"
    )
    out = subprocess.run(
        [script, "list", "--storage", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0 and f"no baselines under {tmp_path}" in out.stdout, out.stderr


def test_cli_compare_uses_each_measurements_own_options(
    perf: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A marker's max_slowdown and ignore_counters travel in the results file: compare honours them."""
    perf.makepyfile("""
import os, torch, pytest

@pytest.mark.torchperf(max_slowdown="9900%", ignore_counters=["memory", "flops", "ops"])
def test_lenient(torchperf):
    width = int(os.environ.get("WIDTH", "64"))
    torchperf(torch.nn.Linear(64, width), torch.randn(8, 64), name="lenient", check_finite=True)
""")
    perf.runpytest("--torchperf-save").assert_outcomes(passed=1)
    # The code now looks 10x slower: within the marker's 9900 %, far over the 10 % below (10x
    # margin each way, whatever another process does to this one's timing).
    scale_baselines(perf.path / ".torchperf", 0.1)
    run = perf.runpytest("--torchperf-compare", "--torchperf-json", "r.json")
    run.assert_outcomes(passed=1)
    code = cli.main(["compare", str(perf.path / ".torchperf"), str(perf.path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0 and "torchperf: 1 pass" in out
    # Overriding the recorded limit on the command line is still possible.
    assert (
        cli.main(
            [
                "compare",
                str(perf.path / ".torchperf"),
                str(perf.path / "r.json"),
                "--max-slowdown",
                "10%",
                "--min-cpu-share",
                "0",
                "--max-spread",
                "1000%",
            ]
        )
        == 1
    )
    assert "in re-measures in this process" in capsys.readouterr().out  # the plugin's own passes
    assert cli.main(["compare", str(perf.path / "no-such-folder"), str(perf.path / "r.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
