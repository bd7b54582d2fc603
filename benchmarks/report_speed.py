"""Time and size of the reports for a 200-measurement run (goal: under 2 s, HTML under 2 MB).

Builds a baseline folder holding 200 measurements x 10 stored sessions (100 per-call times each,
like a 1 s measurement of a ~10 ms-block model) and the 200 records of a compare run over it,
then times what the plugin does at the end of such a run: reading the stored histories and
rendering the HTML report, the markdown summary and the pytest-benchmark JSON.

    python benchmarks/report_speed.py [--measurements 200] [--sessions 10]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measurements", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=10)
    args = parser.parse_args()

    from pytest_torchperf.core.stats import summarize
    from pytest_torchperf.report.benchmark_json import benchmark_json
    from pytest_torchperf.report.html import html_report, stored_histories
    from pytest_torchperf.report.markdown import markdown_report
    from pytest_torchperf.store.baselines import BaselineStore
    from pytest_torchperf.store.record import Record
    from pytest_torchperf.store.sessions import Session

    rng = random.Random(0)
    storage = Path(tempfile.mkdtemp(prefix="torchperf-report-bench-"))
    store = BaselineStore(storage)
    env_id, environment = "cpu-bench-t1-00000000", {"exact": {"device": "cpu"}}
    records = []
    start = time.perf_counter()
    for i in range(args.measurements):
        nodeid = f"tests/test_models_{i // 20}.py::test_model_{i}"
        base = 1e-3 * (1 + i % 17)
        for s in range(args.sessions):
            times = [base * rng.uniform(0.97, 1.05) for _ in range(100)]
            summary = summarize(times)
            store.record(
                env_id,
                environment,
                nodeid,
                "m",
                Session.from_json(
                    {
                        "statistic": summary.p25,
                        "times": times,
                        "timestamp": f"2026-11-{s + 1:02d}T00:00:00",
                        "git_sha": f"{s:040x}",
                        "run_id": f"r{s}",
                        "counters": {"flops": 1000 + i},
                    }
                ),
            )
        samples = [
            base * rng.uniform(0.97, 1.05) * (1.3 if i % 50 == 0 else 1.0) for _ in range(100)
        ]
        summary = summarize(samples)
        failed = i % 50 == 0
        records.append(
            {
                "nodeid": nodeid,
                "name": "m",
                "group": None,
                "device": "cpu",
                "threads": 1,
                "environment_id": env_id,
                "outcome": "fail" if failed else "pass",
                "samples": samples,
                "stats": summary.to_dict(),
                "number_per_block": 10,
                "cpu_share": 0.99,
                "verdict": {
                    "outcome": "fail" if failed else "pass",
                    "baseline_statistic": base,
                    "ratio": summary.p25 / base - 1,
                    "message": f"m: {summary.p25 / base - 1:+.1%}",
                },
                "counters": {"flops": 1000 + i, "params": 10, "peak_memory": 4096},
                "counter_changes": [],
                "failures": [],
                "run_id": "now",
                "speedup": {"median": 1.5, "p25": 1.4, "p75": 1.6, "n": 30} if i % 5 else None,
                "accuracy": {"rel_l2": 1e-3} if i % 5 else None,
            }
        )
    print(
        f"setup: {args.measurements} measurements x {args.sessions} sessions in "
        f"{time.perf_counter() - start:.1f} s ({storage})"
    )

    timings = {}
    start = time.perf_counter()
    records = [Record.from_json(r) for r in records]
    histories = stored_histories(storage, records)
    timings["read histories"] = time.perf_counter() - start
    start = time.perf_counter()
    page = html_report(records, "torchperf: compare; device=cpu", histories)
    timings["HTML"] = time.perf_counter() - start
    start = time.perf_counter()
    markdown = markdown_report(records, "torchperf: compare; device=cpu")
    timings["markdown"] = time.perf_counter() - start
    start = time.perf_counter()
    data = json.dumps(benchmark_json(records, {"machine": "bench"}, {"id": "x"}))
    timings["JSON"] = time.perf_counter() - start
    for what, seconds in timings.items():
        print(f"{what:15} {seconds * 1000:8.1f} ms")
    print(f"{'total':15} {sum(timings.values()) * 1000:8.1f} ms (goal < 2000 ms)")
    print(
        f"HTML {len(page.encode()) / 1e6:.2f} MB (goal < 2 MB), markdown {len(markdown) / 1e3:.0f} KB, "
        f"JSON {len(data) / 1e6:.2f} MB"
    )


if __name__ == "__main__":
    main()
