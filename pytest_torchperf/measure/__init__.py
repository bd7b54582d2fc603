"""Running user code for numbers: block sampling, the timer, machine load, counters, profiling,
devices, NVTX, torch state, output fingerprints and accuracy (torch imported lazily).
"""
