"""`make bench`: every benchmark in turn; each prints its own table with its same-run baseline."""

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RUNS = (
    ("closed loop: advice applied to simulated servers", ["closed_loop.py"]),
    ("parser vs prometheus_client", ["parse.py", "--repeat", "200"]),
    ("redact on 1 MB of each hostile shape", ["redact.py", "--repeat", "9"]),
    ("log scanner: a busy log", ["logs.py", "--lines", "100000", "--repeat", "15"]),
    ("check --log on a 1 GB log, beside grep", ["log_replay.py", "--mb", "1024"]),
    ("simulator: 1,000 servers", ["sim_scale.py", "--servers", "1000", "--seconds", "30"]),
    ("daemon: 1,000 targets", ["scale.py", "--targets", "1000", "--seconds", "40", "--untuned"]),
    ("daemon memory: label values new every scrape", ["label_churn.py", "--seconds", "60"]),
    ("a window's memory with its histogram buckets, beside without", ["window_memory.py"]),
    ("a window's p99 as the daemon reads it, beside its fine histogram", ["window_p99.py"]),
    (
        "TTFT p99 off SGLang's buckets: the daemon's read beside a candidate",
        ["ttft_read.py", "--runs", "100"],
    ),
    ("HTTP clients, fetch only", ["clients.py", "--targets", "1000", "--seconds", "30"]),
    ("daemon beside Prometheus: 200 targets", ["peer.py", "--targets", "200", "--seconds", "40"]),
    (
        "daemon beside Prometheus: 1,000 targets",
        ["peer.py", "--targets", "1000", "--seconds", "40"],
    ),
    ("fleet through Prometheus: 10,000 targets", ["fleet.py", "--targets", "10000"]),
    ("check --prometheus: 1,000 servers' hour of history", ["history.py", "--targets", "1000"]),
    (
        "/metrics read in a loop at 10,000 targets (gzip), beside 6023963's",
        ["metrics_load.py", "--gzip", "--seconds", "45", "--compare-with", "6023963"],
    ),
)


def main() -> int:
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "daemon")}
    failed = 0
    for title, args in RUNS:
        print(f"\n=== {title}: python bench/{' '.join(args)}", flush=True)
        failed += subprocess.call([sys.executable, str(BENCH / args[0]), *args[1:]], env=env) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
