"""``torchperf graph``: a measurement's graph and per-node figures for Model Explorer, from a
hand-made results file (tests/data/graph_record.json in a results file the real writer wrote),
and the page in headless Chromium with the overlay drawn."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest

from pytest_torchperf import cli
from pytest_torchperf.report.benchmark_json import benchmark_json
from pytest_torchperf.report.explorer import MARKED_ANCESTOR_BORDER, MARKED_BG
from pytest_torchperf.store.record import Record
from tests import browser
from tests.unit.test_report_writers import record

GRAPH = json.loads((Path(__file__).resolve().parents[1] / "data" / "graph_record.json").read_text())
OVERLAYS = [
    "share-of-call-pct.json",
    "flops.json",
    "output-bytes.json",
    "own-time-ms.json",
    "change-vs-baseline-pct.json",
]


def _results(path: Path, records: list[dict[str, Any]]) -> Path:
    doc = benchmark_json(
        [Record.from_json(r) for r in records],
        {"node": "n"},
        {"id": "a" * 40, "dirty": False},
        {"mode": "compare"},
    )
    path.write_text(json.dumps(doc))
    return path


def _with_graph(name: str, graph: dict[str, Any] = GRAPH["graph"]) -> dict[str, Any]:
    return {
        **record(name, "fail", ratio=2.0),
        "nodeid": f"tests/test_perf.py::test_{name}",
        "graph": graph,
    }


def test_no_browser_writes_the_files_and_says_how_to_open_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    results = _results(tmp_path / "results.json", [_with_graph("bs1"), record("plain", "pass")])

    assert cli.main(["graph", str(results), "--no-browser"]) == 0

    out = capsys.readouterr().out
    folder = tmp_path / ".torchperf-graph" / "test_bs1-bs1"
    assert sorted(p.name for p in folder.iterdir()) == sorted(["graph.json", *OVERLAYS])
    assert "nodes explain 80% of the call's time" in out
    assert "where the time grew, most first: block.fc" in out
    [command] = [line.strip() for line in out.splitlines() if line.strip().startswith("model-")]
    overlays = ",".join(str(folder / name) for name in OVERLAYS)
    assert command == f"model-explorer {folder / 'graph.json'} --node_data_paths={overlays}"
    graph = json.loads((folder / "graph.json").read_text())
    assert graph["graphs"][0]["id"] == "bs1"
    change = json.loads((folder / "change-vs-baseline-pct.json").read_text())
    assert change["bs1"]["results"]["linear"]["bgColor"] == MARKED_BG

    # Written again without a baseline: the stale change overlay goes, --out is honoured.
    plain = {
        **GRAPH["graph"],
        # As --torchperf-graph records it without a baseline: no baseline_time, no change.
        "nodes": [
            {k: v for k, v in n.items() if k not in ("change", "baseline_time")}
            for n in GRAPH["graph"]["nodes"]
        ],
    }
    results = _results(tmp_path / "again.json", [_with_graph("bs1", plain)])
    assert cli.main(["graph", str(results), "--no-browser", "--out", str(folder)]) == 0
    assert not (folder / "change-vs-baseline-pct.json").exists()
    assert "--node_data_paths=" in capsys.readouterr().out


def test_the_printed_flag_is_model_explorers_own() -> None:
    spec = importlib.util.find_spec("model_explorer")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip('Model Explorer is not installed (pip install "pytest-torchperf[explorer]")')
    # cmdline.py parses sys.argv when imported: read it instead.
    source = (Path(list(spec.submodule_search_locations)[0]) / "cmdline.py").read_text()
    assert "'--node_data_paths'" in source and "comma separated" in source


def test_several_graphs_or_none_is_an_error_that_lists_the_measurements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two = _results(tmp_path / "two.json", [_with_graph("bs1"), _with_graph("bs8")])
    assert cli.main(["graph", str(two), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "2 measurements in" in err and "pick one with -k" in err
    assert "test_bs1 bs1" in err and "test_bs8 bs8" in err

    none = _results(tmp_path / "none.json", [record("plain", "pass")])
    assert cli.main(["graph", str(none), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "has a graph: record one with pytest --torchperf-graph" in err
    assert "t.py::test_plain plain" in err
    assert cli.main(["graph", str(none), "-k", "nothing-like-it", "--no-browser"]) == 2
    assert "no measurement matching -k 'nothing-like-it'" in capsys.readouterr().err


def test_k_picks_one_of_several_graphs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two = _results(tmp_path / "two.json", [_with_graph("bs1"), _with_graph("bs8")])
    out = tmp_path / "o"
    assert cli.main(["graph", str(two), "-k", "bs8", "--no-browser", "--out", str(out)]) == 0
    assert json.loads((out / "graph.json").read_text())["graphs"][0]["id"] == "bs8"
    assert "test_bs8 bs8" in capsys.readouterr().out


def test_a_graph_that_could_not_be_exported_prints_why_and_the_op_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    failed = {
        **GRAPH["graph"],
        "exported": False,
        "why_not": "torch.export failed: data-dependent control flow",
        "nodes": [],
        "marked": [],
    }
    results = _results(tmp_path / "results.json", [_with_graph("bs1", failed)])

    assert cli.main(["graph", str(results)]) == 0

    out = capsys.readouterr().out
    assert "no graph to draw: torch.export failed: data-dependent control flow" in out
    lines = out.splitlines()
    header = [i for i, line in enumerate(lines) if line.split()[:2] == ["op", "time"]]
    assert header, out
    assert lines[header[0] + 1].split()[:3] == ["aten::linear", "1.2", "ms"]
    assert not (tmp_path / ".torchperf-graph").exists()


def test_without_the_extra_a_one_line_error_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # import raises ImportError
    results = _results(tmp_path / "results.json", [_with_graph("bs1")])

    assert cli.main(["graph", str(results), "--out", str(tmp_path / "o")]) == 2

    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "torchperf graph: opening the graph needs Model Explorer (the explorer extra): pip "
        'install "ai-edge-model-explorer>=0.1.30"; --no-browser writes the files only'
    ]
    assert "Traceback" not in captured.out + captured.err
    assert (tmp_path / "o" / "graph.json").exists()  # the files are there to open elsewhere


def test_the_browser_is_opened_on_the_marked_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[Any] = []

    class Config:
        def __init__(self) -> None:
            self.models: list[str] = []
            self.node_data: list[str] = []

        def add_model_from_path(self, path: str) -> None:
            self.models.append(path)

        def add_node_data_from_path(self, path: str) -> None:
            self.node_data.append(path)

        def to_url_param_value(self) -> str:
            return "replaced"

    fake = types.ModuleType("model_explorer")
    fake.config = Config  # type: ignore[attr-defined]
    fake.visualize_from_config = lambda config, port: opened.append((config, port))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "model_explorer", fake)
    out = tmp_path / "o"
    results = _results(tmp_path / "results.json", [_with_graph("bs1")])

    assert cli.main(["graph", str(results), "--out", str(out), "--port", "8123"]) == 0

    [(config, port)] = opened
    assert port == 8123
    assert config.models == [str(out / "graph.json")]
    assert config.node_data == [str(out / name) for name in OVERLAYS]
    data = json.loads(unquote(config.to_url_param_value()))
    assert data["nodeData"] == config.node_data
    [pane] = data["uiState"]["paneStates"]
    assert pane["selectedNodeId"] == "linear"
    assert pane["deepestExpandedGroupNodeIds"][0].endswith("Linear_fc___group___")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


@pytest.mark.slow  # 34 s: Model Explorer starts, then 25 s for the page to draw (50 s more if not)
@pytest.mark.skipif(
    browser.chromium() is None,
    reason="no Chromium/Chrome binary on PATH (Debian: apt-get install chromium)",
)
def test_model_explorer_draws_the_overlay_in_headless_chromium(tmp_path: Path) -> None:
    """`torchperf graph` serves Model Explorer; the page it opens, screenshot beside the same
    page without the overlays: the marked node's colour is in the first and not the second,
    and both drew the graph (the marked module's group borders come with the graph file)."""
    if importlib.util.find_spec("model_explorer") is None:
        pytest.skip('Model Explorer is not installed (pip install "pytest-torchperf[explorer]")')
    results = _results(tmp_path / "results.json", [_with_graph("bs1")])
    port = _free_port()
    # BROWSER=true: the command's webbrowser.open runs `true URL` instead of a browser.
    env = {**os.environ, "BROWSER": "true", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "pytest_torchperf.cli", "graph", str(results), "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url, lines = None, []
        deadline = time.monotonic() + 120
        assert server.stdout is not None
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith(f"http://localhost:{port}/?data="):
                url = line.strip()
        assert url, "Model Explorer did not start:\n" + "".join(lines)
        data = json.loads(unquote(url.split("data=", 1)[1]))
        assert data["uiState"]["paneStates"][0]["selectedNodeId"] == "linear"
        bare = {k: v for k, v in data.items() if k not in ("nodeData", "nodeDataTargets")}
        without = url.split("?", 1)[0] + "?data=" + quote(json.dumps(bare))
        shot = tmp_path / "graph-view.png"
        width, height = 2400, 900
        left, right = (0, 0, width // 2, height), (width // 2, 0, width, height)
        border = _rgb(MARKED_ANCESTOR_BORDER)
        for wait in (25.0, 50.0):  # a busy machine gets a second, longer look
            console = browser.render_frames([url, without], shot, wait, width, height)
            drawn = [browser.colour_pixels(shot, border, 16, box) for box in (left, right)]
            if min(drawn) > 100:
                break
        assert min(drawn) > 100, f"the graph was not drawn in both panes {drawn}: {console}"
        marked = [browser.colour_pixels(shot, _rgb(MARKED_BG), 10, box) for box in (left, right)]
        assert marked[0] > 1000, f"the change overlay is not drawn: {marked}, {console}"
        assert marked[1] < 50, f"the marked colour without any overlay: {marked}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
