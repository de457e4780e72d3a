"""Benchmark: N simulated SGLang servers in one process, each scraped every 5 s.

Runs the simulator in a child process, scrapes every server's /metrics on a keep-alive
connection at a fixed interval (staggered like a real scraper), and reports the achieved scrape
rate, latency p50/p99 and the child's CPU use. The baseline, measured in the same run, is the same
child serving a fixed pre-rendered page on every port (no scheduler model, no rendering).

    PYTHONPATH=daemon python bench/sim_scale.py [--servers 1000] [--seconds 30] [--interval 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

MIX = "healthy,queue_flood,retraction_storm,scheduler_too_conservative,client_too_slow,idle"


def raise_fd_limit() -> None:
    """Allow one socket per server (and per scrape connection)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def child(count: int, static: bool) -> None:
    """The simulator process: serve `count` servers, print their ports, run until stdin closes."""
    from sglang_sim import ServerSpec, SimFleet
    from sglang_sim.exposition import render_metrics
    from sglang_sim.fleet import tune_gc
    from sglang_sim.http import METRICS_TYPE, Response, SimServer
    from sglang_sim.model import ServerModel

    names = MIX.split(",")
    fleet = SimFleet([ServerSpec(names[i % len(names)]) for i in range(count)], seed=1)
    await fleet.start()
    if static:
        model = fleet.servers[0].model
        model.advance_to(60.0)
        body = render_metrics(model).encode()
        SimServer.handle = lambda *_: Response(200, body, METRICS_TYPE)  # type: ignore[method-assign]
        ServerModel.advance_to = lambda *_: None  # type: ignore[method-assign]
    tune_gc()
    print(json.dumps([s.port for s in fleet.servers]), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await fleet.stop()


async def scrape_one(
    port: int,
    offset: float,
    interval: float,
    until: float,
    latencies: list[float],
    errors: list[int],
) -> None:
    """Scrape one server every `interval` seconds on one keep-alive connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    next_at = time.monotonic() + offset
    while next_at < until:
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        start = time.monotonic()
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            latencies.append(time.monotonic() - start)
        except (OSError, asyncio.IncompleteReadError, IndexError):
            errors.append(1)
            return
        next_at += interval
    writer.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(count: int, static: bool, seconds: float, interval: float) -> dict[str, float]:
    """Start a child, scrape it for `seconds` after one warm-up interval, return the figures."""
    cmd = [sys.executable, __file__, "--child", str(count)] + (["--static"] if static else [])
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ports = json.loads(proc.stdout.readline())
    latencies: list[float] = []
    errors: list[int] = []
    begin = time.monotonic() + 1.0
    until = begin + interval + seconds
    tasks = [
        scrape_one(port, 1.0 + interval * i / count, interval, until, latencies, errors)
        for i, port in enumerate(ports)
    ]
    gather = asyncio.gather(*tasks)
    await asyncio.sleep(1.0 + interval)
    measured_from, cpu_from, done_from = time.monotonic(), cpu_seconds(proc.pid), len(latencies)
    await gather
    wall = time.monotonic() - measured_from
    cpu = cpu_seconds(proc.pid) - cpu_from
    proc.stdin.close()
    proc.wait(timeout=30)
    window = sorted(latencies[done_from:])
    return {
        "scrapes_per_s": len(window) / wall,
        "expected_per_s": count / interval,
        "p50_ms": 1000 * window[len(window) // 2],
        "p99_ms": 1000 * window[int(len(window) * 0.99)],
        "cpu_pct": 100 * cpu / wall,
        "errors": float(len(errors)),
    }


def report(rows: dict[str, dict[str, float]]) -> str:
    """A small table plus the ratios against the baseline."""
    lines = [
        f"{'mode':<10}{'scrapes/s':>11}{'expected':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'CPU %':>8}{'errors':>8}"
    ]
    for mode, r in rows.items():
        lines.append(
            f"{mode:<10}{r['scrapes_per_s']:>11.1f}{r['expected_per_s']:>10.1f}"
            f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{r['cpu_pct']:>8.1f}{r['errors']:>8.0f}"
        )
    sim, base = rows["sim"], rows["static"]
    lines.append(
        f"sim / static: CPU x{sim['cpu_pct'] / max(base['cpu_pct'], 0.01):.1f}, "
        f"p99 x{sim['p99_ms'] / max(base['p99_ms'], 0.001):.1f}"
    )
    return "\n".join(lines)


def main() -> None:
    """Parse flags; run as the parent (benchmark) or the child (simulator)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--static", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_fd_limit()
    if args.child:
        asyncio.run(child(args.child, args.static))
        return
    rows = {}
    for mode in ("static", "sim"):
        rows[mode] = asyncio.run(
            measure(args.servers, mode == "static", args.seconds, args.interval)
        )
    print(
        f"{args.servers} servers, one /metrics scrape each every {args.interval:g} s, "
        f"{args.seconds:g} s measured after a {args.interval:g} s warm-up"
    )
    print(report(rows))


if __name__ == "__main__":
    main()
