"""Benchmark: `sglang-tuner check --prometheus` over an hour of 1,000 SGLang servers' history.

The TSDB is built from simulator pages with promtool (bench/fleet_data.py: `--distinct`
simulated servers, copied to `--targets` label sets, one sample every 30 s over the hour before
now); Prometheus serves it. Measured in one run, each `--repeat` times (the median reported):
- `check --prometheus URL --since 1h --format json` as a user runs it (a fresh process): wall
  time, the number of queries it sends, the servers it judged;
- baselines: one range query of the same hour at `check`'s step (the first, a gauge); the
  naive read: the round's 24 queries as range queries at the scrape interval (30 s), latency
  quantiles at every step (once: it is slow); both from a bare client (JSON parsed, nothing
  else); and the CLI's own start-up (`check --help`).

    PYTHONPATH=daemon python bench/history.py [--targets 1000] [--distinct 16] [--repeat 3]
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_process import env, launch_prometheus
from fleet_data import build
from sglang_tuner.sources.prometheus.promql import UP, PromQL, build_queries

HOUR = 3600
STEP = 30  # the TSDB's scrape interval
CHECK_STEP = 60  # the query step `check` takes for --since 1h (60 samples a window)


def built_end(tsdb: Path) -> float | None:
    """The last sample's time in a TSDB promtool built (None: no blocks there)."""
    ends = [json.loads(m.read_text())["maxTime"] for m in tsdb.glob("*/meta.json")]
    return (max(ends) - 1) / 1000 if ends else None


def start(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus serving the TSDB (bench/fleet.py's), ready once it answers a query: blocks on
    both sides of a 2-hour boundary never merge, and need not."""
    proc, url = launch_prometheus(tmp)
    for _ in range(600):
        try:
            if httpx.get(f"{url}/api/v1/query", params={"query": "1"}, timeout=5).is_success:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"Prometheus did not start: see {tmp / 'prometheus.log'}")


def check_run(url: str, end: float) -> dict[str, Any]:
    """One `check --prometheus` in a fresh process: wall time, queries, servers judged (no
    /server_info: the stored servers do not exist)."""
    cmd = [sys.executable, "-m", "sglang_tuner", "check", "--prometheus", url, "--since", "1h",
           "--at", f"{end:.3f}", "--format", "json", "--server-url-template", ""]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env(), check=True)
    wall = time.perf_counter() - began
    said = re.search(r"(\d+) server\(s\).*?(\d+) range queries \(([\d.]+) s\)", done.stderr)
    report = json.loads(done.stdout)
    assert said is not None, done.stderr
    return {
        "wall_seconds": wall,
        "servers": int(said.group(1)),
        "queries": int(said.group(2)),
        "query_seconds": float(said.group(3)),  # the range queries' own wall time
        "advice": report["count"],
    }


def startup_seconds() -> float:
    """The CLI's start-up alone: `check --help` in a fresh process."""
    began = time.perf_counter()
    cmd = [sys.executable, "-m", "sglang_tuner", "check", "--help"]
    subprocess.run(cmd, capture_output=True, env=env(), check=True)
    return time.perf_counter() - began


def bare_range_queries(url: str, end: float, step: float, only_first: bool) -> dict[str, float]:
    """The round's range queries over the hour, every one at `step` with rates over two steps
    (or only the first, a gauge), from a bare client: JSON parsed, nothing else."""
    promql = PromQL(["instance", "job"], "", max(60.0, 2 * step))
    exprs = [q.expr for q in build_queries(promql) if q.name != UP]
    exprs = exprs[:1] if only_first else exprs
    start = end - HOUR + step

    async def run() -> dict[str, float]:
        limit = asyncio.Semaphore(4)  # as `check`: max_concurrent_queries
        async with httpx.AsyncClient(base_url=url, timeout=300) as client:

            async def ask(expr: str) -> int:
                async with limit:
                    data = {"query": expr, "start": start, "end": end, "step": step}
                    response = await client.post("/api/v1/query_range", data=data)
                    result = response.json()["data"]["result"]
                    return sum(len(r["values"]) for r in result)

            began = time.perf_counter()
            points = sum(await asyncio.gather(*(ask(e) for e in exprs)))
            return {"seconds": time.perf_counter() - began, "points": points}

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--distinct", type=int, default=16, help="simulated servers rendered")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the TSDB here and keep it")
    args = parser.parse_args()
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="history-bench-"))
    figures: dict[str, Any] = {"targets": args.targets, "distinct": args.distinct}
    end = built_end(tmp / "tsdb")
    if end is None:  # build it (else: the TSDB a previous --keep run left, reused)
        end = float(int(time.time()) // STEP * STEP - STEP)
        steps = range(int(end) - HOUR, int(end) + 1, STEP)
        built = time.monotonic()
        figures["build"] = build(tmp, args.targets, args.distinct, steps)
        figures["build"]["seconds"] = time.monotonic() - built
    proc, url = start(tmp)
    try:
        load = os.getloadavg()[0]
        runs, one = [], []
        for _ in range(args.repeat):  # interleaved: both see the same machine
            one.append(bare_range_queries(url, end, CHECK_STEP, True))
            runs.append(check_run(url, end))
        # the naive read: every query at the scrape interval, latency quantiles included
        every = [bare_range_queries(url, end, STEP, False)]
        boot = [startup_seconds() for _ in range(args.repeat)]
        load = max(load, os.getloadavg()[0])
    finally:
        proc.terminate()
        proc.wait(30)
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    check = statistics.median(r["wall_seconds"] for r in runs)
    single = statistics.median(r["seconds"] for r in one)
    bare = statistics.median(r["seconds"] for r in every)
    figures |= {
        "check_wall_seconds": check,
        "check_queries": runs[0]["queries"],
        "check_servers": runs[0]["servers"],
        "check_advice": runs[0]["advice"],
        "one_range_query_seconds": single,
        "one_range_query_points": one[0]["points"],
        "naive_range_queries_seconds": bare,
        "naive_range_queries_points": every[0]["points"],
        "load_average_1m_max": load,
        "cpus": os.cpu_count(),
        "cli_startup_seconds": statistics.median(boot),
        "check_query_seconds": statistics.median(r["query_seconds"] for r in runs),
        "check_over_one_query": check / single,
        "check_over_naive_queries": check / bare,
        "runs": runs,
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
