"""The test suite's layout: ``unit/`` (pure modules, no torch), ``measure/`` (modules that run torch,
without pytester), ``e2e/`` (pytester runs of every workflow; their fixtures and torch pre-loading
live in ``e2e/conftest.py``) and the example project run as a user runs it."""

import os

# Run under pytest-xdist (``-n 2``, CONTRIBUTING.md), the suite's workers carry
# PYTEST_XDIST_* variables. The pytest runs the tests start themselves (pytester,
# subprocesses) are not workers of that run: inheriting the marks would make them share one
# storage lock file and pick a GPU by the outer worker's number.
for _mark in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_mark, None)
