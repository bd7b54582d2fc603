"""The pytest glue: hooks, options, fixtures, stash, per-test isolation, child runs, the end-of-run
reporter.
"""
