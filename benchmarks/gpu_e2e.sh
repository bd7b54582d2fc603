#!/usr/bin/env bash
# Exercise pytest-torchperf end to end on a CUDA machine and keep the logs.
#
#   bash benchmarks/gpu_e2e.sh            # logs + HTML report under $OUT (or /tmp/gpu_e2e)
#
# Steps (each under its own time limit, so one hang cannot eat the rest): the CUDA primitives
# (benchmarks/gpu_check.py), the GPU perf tests (benchmarks/gpu_tests) saved then compared with an
# HTML report and JUnit XML, the same under pytest-xdist with two workers sharing the GPU,
# --torchperf-processes on the GPU, and the project's own test suite with a GPU present (device
# "auto" then means cuda).
set -u
out=${OUT:-/tmp/gpu_e2e}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
exec > >(tee "$out/all.log") 2>&1
step() {
    local limit=$1; shift
    echo "=== $* (limit ${limit}s)"
    local start=$SECONDS
    timeout "$limit" "$@"
    echo "=== rc=$? after $((SECONDS - start))s"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
python3 -m pip install -q --no-deps --no-build-isolation -e . -e ./example_project 2>&1 | tail -2
step 60 python3 benchmarks/gpu_check.py
store=$(mktemp -d)
# Three processes, not the default five: the save alone took 144 s with five on an H200.
step 120 python3 -m pytest benchmarks/gpu_tests -p no:cacheprovider -rA -q \
    --torchperf-save --torchperf-processes 3 --torchperf-storage "$store"
step 100 python3 -m pytest benchmarks/gpu_tests -p no:cacheprovider -rA -q \
    --torchperf-compare --torchperf-storage "$store" \
    --torchperf-html "$out/gpu_report.html" --junitxml "$out/gpu_junit.xml"
find "$store" -name '*.json' | head -3
xstore=$(mktemp -d)
step 60 python3 -m pytest benchmarks/gpu_tests -p no:cacheprovider -q -n 2 -k "linear or profiler or memory" \
    --torchperf-save --torchperf-storage "$xstore"
step 60 python3 -m pytest benchmarks/gpu_tests -p no:cacheprovider -q -n 2 -k "linear or profiler or memory" \
    --torchperf-compare --torchperf-storage "$xstore"
pstore=$(mktemp -d)
step 90 python3 -m pytest benchmarks/gpu_tests -p no:cacheprovider -q -k "linear" \
    --torchperf-save --torchperf-processes 3 --torchperf-storage "$pstore"
step 60 python3 -m pytest benchmarks/gpu_tests -p no:cacheprovider -q -k "linear" -rA \
    --torchperf-compare --torchperf-processes 2 --torchperf-storage "$pstore"
# --torchperf-instructions on a GPU machine: CUDA measurements are skipped with the reason (and
# without valgrind on PATH the run is a usage error naming the install command).
command -v valgrind || echo "valgrind: not on PATH"
step 120 python3 -m pytest benchmarks/gpu_tests -p no:cacheprovider -q -rs -k "linear" \
    --torchperf-instructions --torchperf-save --torchperf-storage "$(mktemp -d)"
# Failures are named as they happen (-v | grep) and in JUnit XML, so a run cut by its limit still
# says which tests failed (the suite needs about 300 s with -n 14 on 16 cores).
step 300 python3 -m pytest tests -p no:cacheprovider -v -n 14 -rf --junitxml "$out/suite_junit.xml" \
    -W ignore::DeprecationWarning 2>&1 | tee "$out/suite.log" | grep -E "FAILED|ERROR|passed|failed"
