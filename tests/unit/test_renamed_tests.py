"""Which stored test ids of a module are gone (renamed or deleted), so that a compare's "no
baseline" can name the baseline stored under the old id (pytest_plugin/stash.py)."""

from __future__ import annotations

import types

from pytest_torchperf.pytest_plugin.stash import _exists


def test_a_stored_test_counts_as_gone_only_where_its_module_lacks_it() -> None:
    """Review: an item without a module (a plugin's own item type) made every other stored test
    of its file 'gone', so a compare would have asked "renamed?" of tests that still exist."""
    module = types.SimpleNamespace(test_a=object(), TestB=types.SimpleNamespace(test_c=object()))
    item = types.SimpleNamespace(module=module)
    assert _exists(item, "t.py::test_a[compiled]") and _exists(item, "t.py::TestB::test_c")
    assert not _exists(item, "t.py::test_old")
    assert _exists(types.SimpleNamespace(), "t.py::test_old")  # cannot tell: not gone
