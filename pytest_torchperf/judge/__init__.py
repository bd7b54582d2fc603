"""Deciding: guards, tolerance, the verdict and its wording, drift, cross-machine rules, pooling,
and the one comparison engine used by the plugin and the CLI. Pure: no torch, no pytest.
"""
