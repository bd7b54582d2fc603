"""The test suite's layout: ``unit/`` (pure modules, no torch), ``measure/`` (modules that run torch,
without pytester), ``e2e/`` (pytester runs of every workflow; their fixtures and torch pre-loading
live in ``e2e/conftest.py``) and the example project run as a user runs it."""
