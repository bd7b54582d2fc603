"""One pytest-free run of measurements: its context, the per-measurement pipeline, variants side by
side, explanations, the Result, child processes' measurements.
"""
