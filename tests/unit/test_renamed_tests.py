"""Which stored test ids of a module are gone (renamed or deleted), so that a compare's "no
baseline" can name the baseline stored under the old id (pytest_plugin/stash.py); which stored
measurements of a test the run did not take (a measurement renamed: judge/replay.py)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from pytest_torchperf import cli
from pytest_torchperf.pytest_plugin.stash import _exists
from pytest_torchperf.store.baselines import BaselineStore
from pytest_torchperf.store.sessions import Session
from tests.unit.test_cli_accept import ENV, ENVIRONMENT, NODE, TIMES, results_file


def test_a_stored_test_counts_as_gone_only_where_its_module_lacks_it() -> None:
    """Review: an item without a module (a plugin's own item type) made every other stored test
    of its file 'gone', so a compare would have asked "renamed?" of tests that still exist."""
    module = types.SimpleNamespace(test_a=object(), TestB=types.SimpleNamespace(test_c=object()))
    item = types.SimpleNamespace(module=module)
    assert _exists(item, "t.py::test_a[compiled]") and _exists(item, "t.py::TestB::test_c")
    assert not _exists(item, "t.py::test_old")
    assert _exists(types.SimpleNamespace(), "t.py::test_old")  # cannot tell: not gone


def test_the_offline_compare_names_a_measurement_its_test_no_longer_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`torchperf compare` of a run whose test took `fwd` where its baseline holds `forward`
    (a changed name=) said `no baseline for this environment yet`, as the live run no longer
    does; a stored name the run's other record took is not called left behind."""
    storage = tmp_path / "tp"
    session = Session.from_json({"statistic": 1e-3, "times": TIMES})
    for name in ("forward", "other"):
        BaselineStore(storage).record(ENV, ENVIRONMENT, NODE, name, session)
    results = results_file(tmp_path)  # fwd only
    assert cli.main(["compare", str(storage), results]) == 0
    assert (
        "fwd: no baseline for this measurement; this test's baseline holds forward, other, which "
        f"the test no longer measures (renamed?): pytest {NODE} --torchperf-save starts fwd's "
        f"baseline, and torchperf forget {NODE} forward other --storage {storage} drops the old "
        "ones" in capsys.readouterr().out
    )
    doc = json.loads(Path(results).read_text())
    other = json.loads(json.dumps(doc["benchmarks"][0]))
    other["name"] = other["torchperf"]["measurement"] = "other"
    doc["benchmarks"].append(other)
    Path(results).write_text(json.dumps(doc))
    assert cli.main(["compare", str(storage), results]) == 0
    out = capsys.readouterr().out
    assert "this test's baseline holds forward, which the test no longer measures" in out, out
