"""The test suite's layout: ``unit/`` (pure modules, no torch), ``measure/`` (modules that run torch,
without pytester), ``e2e/`` (pytester runs of every workflow; their fixtures and torch pre-loading
live in ``e2e/conftest.py``) and the example project run as a user runs it."""

import os

import pytest

# Run under pytest-xdist (``-n 2``, CONTRIBUTING.md), the suite's workers carry
# PYTEST_XDIST_* variables. The pytest runs the tests start themselves (pytester,
# subprocesses) are not workers of that run: inheriting the marks would make them share one
# storage lock file and pick a GPU by the outer worker's number.
for _mark in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(_mark, None)


#: Call (or module set-up) seconds of the suite's longest tests in a CI run on the 2-core VM
#: (``--durations``), busy beside the other worker. pytest-xdist hands tests out in collection
#: order, which put the example project's tests (180 s and 88 s) last: the other worker ran
#: out of work a minute or more before them. Under xdist the longest start first (largest
#: first: the short tests fill in at the end); ``-n 0`` keeps collection order (module-scoped
#: fixtures stay set up once). The Valgrind group of test_instructions.py (515 s) goes first
#: anyway: --dist loadgroup queues the scopes with the most tests first.
LONGEST: dict[str, float] = {
    "tests/test_example_project.py::test_example_project_save_compare_and_catch_a_slowdown": 180,
    "tests/test_example_over_time.py::test_history_and_bisect_find_the_commit_that_slowed_the_example_down": 88,
    "tests/e2e/test_ab.py::test_a_slower_working_tree_fails_only_that_test_even_beside_a_cpu_hog": 87,
    "tests/e2e/test_instruction_processes.py::test_processes_side_by_side_each_count_their_share_and_a_dead_one_fails_only_its_tests": 85,
    "tests/e2e/test_ab.py::test_ab_python_compares_two_environments_on_the_working_tree": 56,
    "tests/e2e/test_ab.py::test_src_layout_installed_editable_imports_each_sides_own_code": 56,
    "tests/e2e/test_faults.py::test_xdist_save_and_compare_report_once": 52,
    "tests/e2e/test_bisect.py::test_bisect_by_counters_finds_the_commit_that_added_an_op_skipping_a_broken_one": 44,
    "tests/e2e/test_processes.py::test_a_save_measures_in_five_fresh_processes_by_default": 37,
    "tests/e2e/test_graph_view.py::test_model_explorer_draws_the_overlay_in_headless_chromium": 35,
    "tests/e2e/test_processes.py::test_processes_under_xdist_run_first_and_each_worker_pools_them": 34,
    "tests/e2e/test_processes.py::test_save_with_three_processes_stores_three_sessions_and_compare_pools": 32,
    "tests/e2e/test_ab.py::test_revision_whose_tests_do_not_import": 29,
    "tests/test_example_project.py::test_example_project_compares_clean_against_its_committed_baselines": 29,
    "tests/e2e/test_processes.py::test_pooled_slowdown_confirmed_in_fresh_processes_replays_the_same": 28,
    "tests/e2e/test_hollow_gates.py::test_xdist_workers_pause_their_tests_while_one_times": 21,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its order is the queue's
        items.sort(key=lambda item: -LONGEST.get(item.nodeid, 0.0))
