"""Benchmark: the daemon watching N simulated SGLang servers at a 5 s interval.

Measured in one run, against baselines from the same run:
- CPU: the daemon (`sglang-tuner run`, a real process) vs a bare fetcher that only GETs every
  target's /metrics on the same schedule (the daemon's HttpClient, one per target; no
  parsing, no windows, no rules);
- missed scrapes: scrapes the daemon made vs the schedule;
- memory: daemon RSS with N targets minus RSS with none, per target;
- API latency while scraping: GET /advice p50/p99 vs GET /healthz (same server, same moment).

    PYTHONPATH=daemon python bench/scale.py [--targets 1000] [--seconds 60] [--interval 5]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
MIX = "healthy,scheduler_too_conservative,retraction_storm,client_too_slow,queue_flood,idle"
CLK_TCK = os.sysconf("SC_CLK_TCK")
FETCHER = """
import asyncio, json, resource, sys, time, zlib
from sglang_tuner.sources.timeout import timeout  # asyncio.timeout on 3.11+
from sglang_tuner.sources.http import HttpClient, HttpError
urls, interval, seconds = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
HEADERS = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}
async def one(client, url, until, counts):
    await asyncio.sleep((zlib.crc32(url.encode()) % 1000) / 1000 * interval)
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            async with timeout(3):
                await client.get(url + "/metrics", HEADERS)
            counts[0] += 1
        except (HttpError, TimeoutError):
            counts[1] += 1
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
async def main():
    clients = [HttpClient() for _ in urls]  # one per target, like the daemon
    counts, until = [0, 0], time.monotonic() + seconds
    cpu0 = time.process_time()
    await asyncio.gather(*(one(c, u, until, counts) for c, u in zip(clients, urls)))
    print(json.dumps({"cpu": time.process_time() - cpu0, "ok": counts[0], "failed": counts[1]}))
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
asyncio.run(main())
"""


def free_port_block(count: int, start: int = 20000) -> int:
    """First port of `count` consecutive free ports, below the ephemeral range (32768+)."""
    port = start
    while port + count < 32768:
        if all(_free(p) for p in range(port, port + count)):
            return port
        port += count
    raise RuntimeError("no free port block")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers will
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid: int) -> int:
    """Resident memory of a process, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "daemon")}


def start_sim(count: int, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "sglang_tuner", "sim", "--scenario", MIX,
           "--count", str(count), "--port", str(port), "--seed", "1"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port + count - 1}/health", timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    raise RuntimeError("simulator did not start")


# The daemon without `tune_runtime` (Python's default GIL switch interval and collector).
UNTUNED = (
    "import sys, sglang_tuner.cli.run as s; s.tune_runtime = lambda state: None; "
    "from sglang_tuner.__main__ import main; sys.exit(main())"
)


def start_daemon(
    tmp: Path, urls: list[str], interval: float, untuned: bool = False
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port_block(1, 19000)
    config = {
        "targets": [{"url": u, "name": f"sim-{i}"} for i, u in enumerate(urls)],
        "scrape_interval_seconds": interval,
        "listen_host": "127.0.0.1",
        "listen_port": port,
        "database": str(tmp / f"bench-{len(urls)}.db"),
        "log_level": "warning",
    }
    if not urls:  # nothing to watch yet: an empty file_sd file, or `run` refuses to start
        (tmp / "none.json").write_text("[]")
        config["file_sd"] = [{"files": [str(tmp / "none.json")]}]
    path = tmp / f"config-{len(urls)}.yml"
    path.write_text(yaml.safe_dump(config))
    start = ["-c", UNTUNED] if untuned else ["-m", "sglang_tuner"]
    cmd = [sys.executable, *start, "run", "--config", str(path)]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.25)
    raise RuntimeError("daemon did not start")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_daemon(base: str, pid: int, seconds: float) -> dict[str, object]:
    """CPU over `seconds` of steady state while timing /advice and /healthz."""
    advice: list[float] = []
    health: list[float] = []
    size = 0
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    with httpx.Client(timeout=10) as client:
        while time.monotonic() - t0 < seconds:
            for path, out in (("/advice", advice), ("/healthz", health)):
                started = time.perf_counter()
                response = client.get(base + path).raise_for_status()
                out.append((time.perf_counter() - started) * 1000)
                if path == "/advice":  # as sent (httpx asks for gzip, as curl --compressed)
                    size = max(size, response.num_bytes_downloaded)
            time.sleep(0.2)
    cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
    return {"cpu_share": cpu, "advice_ms": advice, "healthz_ms": health, "advice_bytes": size}


def scrape_counts(base: str) -> tuple[list[int], float]:
    """Every target's scrape count, and the moment it was taken (the request's midpoint)."""
    started = time.monotonic()
    rows = httpx.get(base + "/targets", timeout=30).json()["data"]
    return [row["scrapes_total"] for row in rows], (started + time.monotonic()) / 2


def measure_api_untuned(
    tmp: Path, urls: list[str], interval: float, seconds: float
) -> dict[str, Any]:
    """/advice latency of the daemon without `tune_runtime`, same servers, same run."""
    daemon, base = start_daemon(tmp, urls, interval, untuned=True)
    try:
        time.sleep(2 * interval)
        result = measure_daemon(base, daemon.pid, seconds)
    finally:
        daemon.terminate()
        daemon.wait(20)
    return {
        "untuned_advice_p50_ms": statistics.median(result["advice_ms"]),  # type: ignore[arg-type]
        "untuned_advice_p99_ms": percentile(result["advice_ms"], 0.99),  # type: ignore[arg-type]
        "untuned_cpu_share": result["cpu_share"],
    }


def run(targets: int, seconds: float, interval: float, untuned: bool) -> dict[str, object]:
    port = free_port_block(targets)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(targets)]
    sim = start_sim(targets, port)
    try:
        print(
            f"simulator up: {targets} servers; fetch-only baseline for {seconds:g}s ...", flush=True
        )
        cmd = [sys.executable, "-c", FETCHER, json.dumps(urls), str(interval), str(seconds)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env())
        fetch = json.loads(out.stdout)
        with tempfile.TemporaryDirectory() as tmp:
            empty, empty_base = start_daemon(Path(tmp), [], interval)
            time.sleep(3)
            rss_empty = rss_kib(empty.pid)
            empty.terminate()
            daemon, base = start_daemon(Path(tmp), urls, interval)
            print(
                f"daemon up; warming up {2 * interval:g}s, measuring {seconds:g}s ...", flush=True
            )
            time.sleep(2 * interval)
            before, t0 = scrape_counts(base)
            result = measure_daemon(base, daemon.pid, seconds)
            after, t1 = scrape_counts(base)
            elapsed = t1 - t0
            rss_full = rss_kib(daemon.pid)
            daemon.terminate()
            daemon.wait(20)
            if untuned:
                print(f"without runtime tuning: measuring {seconds:g}s ...", flush=True)
                baseline = measure_api_untuned(Path(tmp), urls, interval, seconds)
    finally:
        sim.terminate()
        sim.wait(20)
    expected = targets * elapsed / interval
    made = sum(after) - sum(before)
    return {
        **(baseline if untuned else {}),
        "targets": targets,
        "interval": interval,
        "daemon_cpu_share": result["cpu_share"],
        "fetch_only_cpu_share": fetch["cpu"] / seconds,
        "scrapes_made": made,
        "scrapes_expected": expected,
        "memory_kib_per_target": (rss_full - rss_empty) / targets,
        "advice_p50_ms": statistics.median(result["advice_ms"]),  # type: ignore[arg-type]
        "advice_p99_ms": percentile(result["advice_ms"], 0.99),  # type: ignore[arg-type]
        "advice_bytes": result["advice_bytes"],
        "healthz_p50_ms": statistics.median(result["healthz_ms"]),  # type: ignore[arg-type]
        "healthz_p99_ms": percentile(result["healthz_ms"], 0.99),  # type: ignore[arg-type]
    }


def report(r: dict[str, object]) -> None:
    cpu, fetch = float(r["daemon_cpu_share"]), float(r["fetch_only_cpu_share"])  # type: ignore[arg-type]
    made, expected = float(r["scrapes_made"]), float(r["scrapes_expected"])  # type: ignore[arg-type]
    print(f"\n{r['targets']} targets every {r['interval']}s")
    print(f"  daemon CPU            {cpu:6.1%} of one core (target < 25%)")
    print(
        f"  fetch-only baseline   {fetch:6.1%} of one core  -> daemon/baseline {cpu / fetch:.2f}x"
    )
    print(f"  scrapes made          {made:.0f} of {expected:.0f} scheduled ({made / expected:.1%})")
    print(f"  memory per target     {r['memory_kib_per_target']:.1f} KiB RSS (target < 150 KiB)")
    advice = f"{r['advice_p50_ms']:.1f} / {r['advice_p99_ms']:.1f} ms"
    health = f"{r['healthz_p50_ms']:.1f} / {r['healthz_p99_ms']:.1f} ms"
    print(f"  GET /advice  p50/p99  {advice} (target p99 < 25 ms)")
    size = float(r["advice_bytes"]) / 1000  # type: ignore[arg-type]
    print(f"  GET /advice  body     {size:.0f} KB gzipped (target < 100 KB)")
    print(f"  GET /healthz p50/p99  {health} (baseline)")
    if "untuned_advice_p99_ms" in r:
        untuned = f"{r['untuned_advice_p50_ms']:.1f} / {r['untuned_advice_p99_ms']:.1f} ms"
        ratio = float(r["advice_p99_ms"]) / float(r["untuned_advice_p99_ms"])  # type: ignore[arg-type]
        print(f"  without runtime tuning {untuned} -> p99 ratio {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument(
        "--untuned", action="store_true", help="also measure /advice without tune_runtime"
    )
    args = parser.parse_args()
    result = run(args.targets, args.seconds, args.interval, args.untuned)
    report(result)
    print(json.dumps(result, default=float))


if __name__ == "__main__":
    main()
