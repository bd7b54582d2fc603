"""The variants of a target (eager, compiled, fused, amp, int8): one registry, and the builders
(torch imported lazily).
"""
