"""Benchmark: the daemon reading 10,000 SGLang servers from a real Prometheus.

The TSDB is built from simulator pages with promtool (bench/fleet_data.py); Prometheus serves it.
Measured in one run:
- Prometheus mode, one replica: CPU per round (every 15 s), peak RSS, query time, /advice
  latency while rounds run (/healthz beside it), every target in every round;
- two replicas (shard 0 and 1 of 2): no target in both, none in neither, CPU per round each;
- baselines: a bare client sending the same queries and parsing the answers (no windows, no
  rules), and direct scraping of as many simulated servers as this machine holds, sampled as
  often (one scrape per 15 s), for the CPU per target and sample.

    PYTHONPATH=daemon python bench/fleet.py [--targets 10000] [--rounds 8] [--direct 1000]
"""

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_process import (
    Daemon,
    cpu_seconds,
    launch_prometheus,
    peak_rss_mib,
    percentile,
    start_sim,
)
from fleet_data import build
from sglang_tuner.sources.prometheus.promql import PromQL, build_queries

INTERVAL = 15.0  # evaluation interval = one round
STEP = 30  # seconds between the TSDB's samples (Prometheus's scrape interval)
RATE_WINDOW = 120.0  # four samples


def start_prometheus(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus on the prepared TSDB, scraping nothing; waits until its blocks are merged."""
    proc, url = launch_prometheus(tmp)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # the overlapping blocks promtool wrote become one
        try:
            text = httpx.get(f"{url}/metrics", timeout=5).text
            if "\nprometheus_tsdb_blocks_loaded 1\n" in text:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(2)
    return proc, url  # still overlapping: queries merge the blocks, just slower


def fetch_only(url: str, rounds: int) -> dict[str, float]:
    """The same queries from a bare client: JSON parsed, nothing else (the floor of a round)."""
    promql = PromQL(["instance", "job"], "", RATE_WINDOW)
    exprs = [q.expr for q in build_queries(promql)]

    async def one_round(client: httpx.AsyncClient, limit: asyncio.Semaphore) -> int:
        async def ask(expr: str) -> int:
            async with limit:
                response = await client.post("/api/v1/query", data={"query": expr})
                return len(response.json()["data"]["result"])

        return sum(await asyncio.gather(*(ask(e) for e in exprs)))

    async def run() -> dict[str, float]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            limit, walls, cpus = asyncio.Semaphore(4), [], []
            for _ in range(rounds):
                wall, cpu = time.monotonic(), time.process_time()
                series = await one_round(client, limit)
                walls.append(time.monotonic() - wall)
                cpus.append(time.process_time() - cpu)
        return {"round_wall_s": statistics.median(walls), "round_cpu_s": statistics.median(cpus),
                "series": series}  # fmt: skip

    return asyncio.run(run())


def fleet_config(url: str, shard: tuple[int, int] = (0, 1)) -> dict[str, Any]:
    return {
        "prometheus": {"url": url, "rate_window_seconds": RATE_WINDOW, "timeout_seconds": 12},
        "evaluation_interval_seconds": INTERVAL,
        "shard": {"index": shard[0], "count": shard[1]},
    }


def measure_rounds(
    daemon: Daemon, rounds: int, prometheus_pid: int | None = None
) -> dict[str, Any]:
    """CPU per round and /advice latency over `rounds` rounds after the first one."""
    daemon.wait_rounds(1, timeout=600)
    first = daemon.evaluations()
    cpu0, prom0 = cpu_seconds(daemon.pid), cpu_seconds(prometheus_pid) if prometheus_pid else 0.0
    daemon.decode_ms.clear()
    advice, health = daemon.poll_latency(lambda: daemon.evaluations() >= first + rounds)
    decode = statistics.median(daemon.decode_ms)
    done = daemon.evaluations() - first
    prom = (cpu_seconds(prometheus_pid) - prom0) / done if prometheus_pid else None
    return {
        "rounds": done, "cpu_per_round_s": (cpu_seconds(daemon.pid) - cpu0) / done,
        "prometheus_cpu_per_round_s": prom, "peak_rss_mib": peak_rss_mib(daemon.pid),
        "advice_p50_ms": statistics.median(advice), "advice_p99_ms": percentile(advice, 0.99),
        "healthz_p99_ms": percentile(health, 0.99), "advice_requests": len(advice),
        "advice_max_ms": max(advice), "client_decode_p50_ms": decode,
    }  # fmt: skip


def check_targets(daemon: Daemon, expected: int) -> dict[str, Any]:
    """After the measurement: every target present, up, and in every round."""
    body = daemon.get("/targets", timeout=120).json()
    rows, queries = body["data"], body["queries"]
    rounds = {r["scrapes_total"] for r in rows}
    return {
        "targets": len(rows), "expected": expected, "up": sum(bool(r["up"]) for r in rows),
        "rounds_per_target": sorted(rounds), "queries": len(queries),
        "query_sum_s": sum(q["duration_seconds"] or 0 for q in queries),
        "query_max_s": max((q["duration_seconds"] or 0 for q in queries), default=0),
        "names": {r["name"] for r in rows},
    }  # fmt: skip


def run_prometheus_mode(
    tmp: Path, url: str, prom_pid: int, targets: int, rounds: int
) -> dict[str, Any]:
    started = time.monotonic()
    with Daemon(tmp / "one", fleet_config(url)) as daemon:
        daemon.wait_rounds(1, timeout=600)
        first_round_s = time.monotonic() - started
        result = measure_rounds(daemon, rounds, prom_pid)
        checked = check_targets(daemon, targets)
    checked.pop("names")
    return {**result, **checked, "start_to_first_evaluation_s": first_round_s}


def run_shards(tmp: Path, url: str, targets: int, rounds: int) -> dict[str, Any]:
    with (
        Daemon(tmp / "s0", fleet_config(url, (0, 2))) as s0,
        Daemon(tmp / "s1", fleet_config(url, (1, 2))) as s1,
    ):
        cpu = [measure_rounds(d, rounds)["cpu_per_round_s"] for d in (s0, s1)]
        a, b = (check_targets(d, targets)["names"] for d in (s0, s1))
    every = {f"10.{i // 62500}.{i // 250 % 250}.{i % 250}:30000" for i in range(targets)}
    return {"shard_sizes": [len(a), len(b)], "in_both": len(a & b),
            "in_neither": len(every - a - b), "cpu_per_round_s": cpu}  # fmt: skip


def run_direct(tmp: Path, servers: int, rounds: int) -> dict[str, Any]:
    port, sim = start_sim(servers)
    try:
        config = {
            "targets": [{"url": f"http://127.0.0.1:{port + i}"} for i in range(servers)],
            "scrape_interval_seconds": INTERVAL, "evaluation_interval_seconds": INTERVAL,
        }  # fmt: skip
        with Daemon(tmp / "direct", config) as daemon:
            daemon.wait_rounds(2, timeout=120)
            cpu0, t0 = cpu_seconds(daemon.pid), time.monotonic()
            advice, _ = daemon.poll_latency(lambda: time.monotonic() - t0 >= rounds * INTERVAL)
            cpu = cpu_seconds(daemon.pid) - cpu0
            samples = servers * (time.monotonic() - t0) / INTERVAL
    finally:
        sim.terminate()
        sim.wait(30)
    return {"servers": servers, "cpu_per_target_sample_ms": 1000 * cpu / samples,
            "advice_p99_ms": percentile(advice, 0.99)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--direct", type=int, default=1000, help="simulated servers scraped")
    args = parser.parse_args()
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        sys.exit("needs prometheus and promtool (make system-deps)")
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmpdir:
        tmp = Path(tmpdir)
        now = int(time.time()) // STEP * STEP
        print(f"building the TSDB: {args.targets} targets ...", flush=True)
        data = build(tmp, args.targets, 48, range(now - 450, now + 1500, STEP))
        prometheus, url = start_prometheus(tmp)
        try:
            print("fetch-only baseline ...", flush=True)
            floor = fetch_only(url, 3)
            print(f"Prometheus mode: {args.rounds} rounds ...", flush=True)
            one = run_prometheus_mode(tmp, url, prometheus.pid, args.targets, args.rounds)
            print("two shards ...", flush=True)
            shards = run_shards(tmp, url, args.targets, 3)
        finally:
            prometheus.terminate()
            prometheus.wait(30)
        print(f"direct baseline: {args.direct} simulated servers ...", flush=True)
        direct = run_direct(tmp, args.direct, args.rounds)
    result = {"data": data, "fetch_only": floor, "prometheus_mode": one, "shards": shards,
              "direct": direct}  # fmt: skip
    report(result, args.targets)
    print(json.dumps(result, default=float))


def report(r: dict[str, Any], targets: int) -> None:
    one, floor, shards, direct = r["prometheus_mode"], r["fetch_only"], r["shards"], r["direct"]
    cpu, fetch = one["cpu_per_round_s"], floor["round_cpu_s"]
    per_target, per_direct = 1000 * cpu / targets, direct["cpu_per_target_sample_ms"]
    lines = [
        f"{targets} targets through Prometheus, one round every {INTERVAL:g} s",
        f"CPU per round          {cpu:6.2f} s (target < 5 s)",
        f"fetch-only baseline    {fetch:6.2f} s -> daemon/fetch {cpu / fetch:.1f}x",
        f"per target and sample  {per_target:6.3f} ms; direct scraping {per_direct:.3f} ms "
        f"({direct['servers']} servers) -> {per_target / per_direct:.2f}x",
        f"peak RSS               {one['peak_rss_mib']:6.0f} MiB (target < 2048)",
        f"queries                {one['queries']} per round; sum {one['query_sum_s']:.2f} s, "
        f"slowest {one['query_max_s']:.2f} s; "
        f"Prometheus CPU {one['prometheus_cpu_per_round_s']:.2f} s per round",
        f"GET /advice p50/p99    {one['advice_p50_ms']:.1f} / {one['advice_p99_ms']:.1f} ms "
        f"(target p99 < 50 ms), max {one['advice_max_ms']:.1f} ms; /healthz p99 "
        f"{one['healthz_p99_ms']:.1f} ms",
        f"  (to the last byte as sent, gzipped; this client then inflates and parses it: "
        f"{one['client_decode_p50_ms']:.0f} ms p50)",
        f"targets                {one['targets']} of {one['expected']}, {one['up']} up, "
        f"rounds per target {one['rounds_per_target']}",
        f"two shards             {shards['shard_sizes']}, in both {shards['in_both']}, "
        f"in neither {shards['in_neither']}, CPU per round "
        f"{shards['cpu_per_round_s'][0]:.2f} / {shards['cpu_per_round_s'][1]:.2f} s",
    ]
    print("\n" + "\n  ".join(lines))


if __name__ == "__main__":
    main()
