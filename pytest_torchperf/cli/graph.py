"""``torchperf graph``: one measurement's exported graph with its per-node figures, in Model
Explorer (docs/graph.md).

The files are built in ``report/explorer.py``; this module picks the measurement, writes them
and opens them, importing ``model_explorer`` (the ``explorer`` extra) only to open them.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, cast
from urllib.parse import quote

from pytest_torchperf.cli.common import PathError, results, selected, table
from pytest_torchperf.core.graph_types import GraphRecord
from pytest_torchperf.core.types import JSONObject
from pytest_torchperf.judge.node_changes import module_label
from pytest_torchperf.report.explorer import (
    OVERLAY_FILES,
    GraphView,
    NoGraph,
    graph_view,
    op_rows,
    url_data,
)
from pytest_torchperf.store.files import atomic_write_text
from pytest_torchperf.store.record import Record

#: How to install it: the ``explorer`` extra is one package (the plugin is installed from a
#: checkout, not from PyPI, so ``pip install "pytest-torchperf[explorer]"`` would not find it).
EXTRA = 'pip install "ai-edge-model-explorer>=0.1.30"'
OPTION = "--torchperf-graph"


def folder_name(record: Record) -> str:
    """``.torchperf-graph/<this>/``: the test and the measurement, safe as a folder name."""
    test = record.nodeid.split("::")[-1] or "test"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{test}-{record.name}").strip("_.")


def _label(record: Record) -> str:
    return f"{record.nodeid if record.has('nodeid') else '?'} {record.name if record.has('name') else '?'}"


def pick(records: list[Record], pattern: str | None, path: str) -> Record | str:
    """The one selected measurement that has a graph, or the error that says why there is none."""
    chosen = [r for r in records if selected(r.nodeid, r.name, pattern)]
    graphs = [r for r in chosen if r.graph is not None]
    # A whole name or test id picks it among those that merely contain it (-k mlp beside
    # mlp[int8] and mlp-bs64: what a failure's "draws it" hint gives).
    exact = [r for r in graphs if pattern in (r.name, r.nodeid)]
    graphs = exact if len(exact) == 1 else graphs
    which = f" matching -k {pattern!r}" if pattern else ""
    if len(graphs) == 1:
        return graphs[0]
    if graphs:
        names = "\n".join(f"  {_label(r)}" for r in graphs)
        return (
            f"{len(graphs)} measurements{which} in {path} have a graph; pick one with -k "
            f"(a part of its test id or name):\n{names}"
        )
    if not chosen:
        names = "\n".join(f"  {_label(r)}" for r in records) or "  (none)"
        return f"no measurement{which} in {path}; it holds:\n{names}"
    names = "\n".join(f"  {_label(r)}" for r in chosen)
    how = "--torchperf-save" if Path(path).is_dir() else f"--torchperf-json {path}"
    return (
        f"no measurement{which} in {path} has a graph: record one with pytest {OPTION} "
        f"(with {how}); measurements without one:\n{names}"
    )


def write_view(view: GraphView, out: Path) -> tuple[Path, list[Path], JSONObject]:
    """Write the graph and its overlays under ``out``: (graph file, overlay files, URL data)."""
    graph_path = out / "graph.json"
    atomic_write_text(graph_path, json.dumps(view.graph, indent=1) + "\n")
    paths = []
    for overlay in view.node_data:
        path = out / overlay.file
        atomic_write_text(path, json.dumps(overlay.document, indent=1) + "\n")
        paths.append(path)
    for name in OVERLAY_FILES:  # an earlier run's that this view has not: removed
        stale = out / name
        if stale not in paths and stale.exists():
            stale.unlink()
    data = url_data(view, str(graph_path), [str(p) for p in paths])
    return graph_path, paths, data


def open_command(graph_path: Path, overlays: list[Path]) -> str:
    """The ``model-explorer`` command line that opens the files (its flags: cmdline.py)."""
    words = ["model-explorer", str(graph_path)]
    if overlays:
        words.append("--node_data_paths=" + ",".join(str(p) for p in overlays))
    return shlex.join(words)


def stored_graphs(storage: Path) -> list[Record]:
    """A baseline folder's measurements as records with the ``graph`` of the latest session
    that stored one (its figures and structure; no change: a baseline has nothing to compare
    with), or without ``graph`` where none was saved with ``--torchperf-graph``."""
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.graphs import graph_from_stored

    records = []
    for env_id, nodeid, name, sessions in BaselineStore(storage).measurements():
        record: dict[str, Any] = {"nodeid": nodeid, "name": name, "environment_id": env_id}
        saved = next((s for s in reversed(sessions) if s.extra("graph")), None)
        if saved is not None:
            # --torchperf-graph's keys, kept as read (the schema checked their shape).
            record["graph"] = graph_from_stored(
                cast("Mapping[str, object]", saved.extra("graph")),
                cast("Mapping[str, Sequence[float]]", saved.extra("nodes") or {}),
            )
            record["timestamp"] = saved.timestamp
        records.append(Record.from_json(record))
    return records


def cmd_graph(args: argparse.Namespace) -> int:
    if not Path(args.results).exists():  # the default folder too: not "results file .torchperf"
        raise PathError(
            f"{args.results} does not exist: give a results file (pytest --torchperf-json PATH "
            f"wrote it) or the baseline folder (--storage DIR; default .torchperf)"
        )
    if Path(args.results).is_dir():
        records = stored_graphs(Path(args.results))
    else:
        records, _ = results([args.results])
    found = pick(records, args.k, args.results)
    if isinstance(found, str):
        print(f"torchperf graph: {found}", file=sys.stderr)
        return 2
    record = found
    # The record's graph as its writer made it (measure/node_figures.py, store/graphs.py).
    graph = cast("GraphRecord", record.graph or {})
    try:
        view = graph_view(record.to_json())  # the graph code reads the record's raw JSON
    except NoGraph as exc:
        print(f"torchperf graph: {_label(record)}: no graph to draw: {exc}")
        print("op-level figures of the call:")
        print(table(op_rows(graph), "(no op-level figures recorded)"))
        return 0
    out = Path(args.out or Path(".torchperf-graph") / folder_name(record)).resolve()
    graph_path, overlays, data = write_view(view, out)
    print(f"torchperf graph: {_label(record)}: {view.summary}")
    if graph.get("marked"):
        grew = ", ".join(module_label(m) for m in graph["marked"])
        print(f"torchperf graph: where the time grew, most first: {grew}")
    if graph.get("no_baseline"):
        print(f"torchperf graph: no change overlay: {graph['no_baseline']}")
    print(f"torchperf graph: wrote {graph_path}")
    for path in overlays:
        print(f"torchperf graph: wrote {path}")
    if args.no_browser:
        print("torchperf graph: open them in Model Explorer with:")
        print(f"  {open_command(graph_path, overlays)}")
        return 0
    try:
        import model_explorer
    except ImportError:
        print(
            f"torchperf graph: opening the graph needs Model Explorer (the explorer extra): "
            f"{EXTRA}; --no-browser writes the files only",
            file=sys.stderr,
        )
        return 2
    config = _config(model_explorer, graph_path, overlays, data)
    model_explorer.visualize_from_config(config, port=args.port)
    return 0


def _config(
    model_explorer: ModuleType, graph_path: Path, overlays: list[Path], data: JSONObject
) -> object:
    """Model Explorer's config for the files, whose URL also opens the view on the node that
    matters (``uiState``: the marked module expanded, its node selected), which its own
    ``to_url_param_value`` cannot say."""

    class Config(model_explorer.config().__class__):  # type: ignore[misc]
        def to_url_param_value(self) -> str:
            return quote(json.dumps(data))

    config = Config()
    config.add_model_from_path(str(graph_path))
    for path in overlays:
        config.add_node_data_from_path(str(path))
    return config
