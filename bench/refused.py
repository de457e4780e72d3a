"""Benchmark: a fleet where most targets refuse connections (a rack powered off, a stale file_sd).

N targets, of which H answer (bench/page_server.py: a real-size SGLang page on H ports) and the
rest are closed ports on 127.0.0.1 that refuse every connection. The daemon (`sglang-tuner run`,
a real process, log level info) scrapes them all for S seconds. Measured against a baseline from
the same run, the H answering targets alone:
- the answering targets' scrape success: scrapes the page server answered vs the schedule;
- GET /healthz latency (p50, p99) polled every 0.25 s while it runs;
- log bytes (the first 10 s, then per minute), CPU seconds per second and peak RSS of the daemon;
the first minute (every target tried every interval) apart from the rest (refusing targets are
tried once a minute after a minute of refusals).

    PYTHONPATH=daemon python bench/refused.py [--targets 10000] [--healthy 100] [--seconds 180]
"""

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_process import Daemon, cpu_seconds, free_port, peak_rss_mib, percentile

INTERVAL = 5.0
FIRST_MINUTE = 60.0  # the default unreachable_retry_seconds: refused targets back off after it
# Refusing ports: below the 20,000s the simulators and page servers of other benchmarks take,
# and below the ephemeral range, so no client socket of the machine is ever bound to one.
FIRST_CLOSED_PORT = 2000
FIRST_PAGE_PORT = 20000


def closed_ports(count: int, skip: set[int]) -> list[int]:
    """`count` ports on 127.0.0.1 that nothing listens on (connections are refused)."""
    ports, port = [], FIRST_CLOSED_PORT
    while len(ports) < count:
        if port >= FIRST_PAGE_PORT:
            raise RuntimeError(f"not enough closed ports below {FIRST_PAGE_PORT}")
        if port not in skip and not _listening(port):
            ports.append(port)
        port += 1
    return ports


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def start_pages(count: int) -> tuple[int, int, subprocess.Popen[bytes]]:
    """bench/page_server.py on `count` consecutive free ports; (first port, control port, proc)."""
    port = FIRST_PAGE_PORT
    while any(_listening(p) for p in range(port, port + count)):
        port += count
    control = free_port()
    cmd = [sys.executable, str(Path(__file__).parent / "page_server.py"), "--port", str(port),
           "--count", str(count), "--control", str(control),
           "--interval", str(INTERVAL)]  # fmt: skip
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{control}/counts", timeout=2)
            return port, control, proc
        except httpx.HTTPError:
            time.sleep(0.25)
    raise RuntimeError("page server did not start")


def scrape_times(control: int) -> dict[int, list[float]]:
    """Per answering port index, the times the daemon scraped it."""
    counts = httpx.get(f"http://127.0.0.1:{control}/counts", timeout=30).json()
    return {int(i): t for i, t in counts["times"].get("sglang-tuner", {}).items()}


def phase(urls: list[str], control: int, healthy: int, seconds: float, tmp: Path) -> dict[str, Any]:
    """One daemon over `urls` (the first `healthy` answer) for `seconds` after a warm-up; the
    first minute (every target tried every interval) measured apart from the rest."""
    targets = [{"url": url, "name": f"t{i}"} for i, url in enumerate(urls)]
    config = {"targets": targets, "log_level": "info", "scrape_interval_seconds": INTERVAL}
    with Daemon(tmp, config) as daemon:
        time.sleep(2 * INTERVAL)  # every target scraped (or refused) once
        marks = [_mark(daemon)]  # start, one minute in, end
        health: list[tuple[float, float]] = []  # (when, ms)
        while (now := time.monotonic()) < marks[0]["ts"] + seconds:
            if len(marks) == 1 and now >= marks[0]["ts"] + FIRST_MINUTE:
                marks.append(_mark(daemon))
            started = time.perf_counter()
            try:
                daemon.get("/healthz", timeout=60)
                health.append((now, (time.perf_counter() - started) * 1000))
            except httpx.HTTPError:
                health.append((now, 60_000.0))
            time.sleep(0.25)
        marks.append(_mark(daemon))
        rss = peak_rss_mib(daemon.pid)
        times = scrape_times(control)
        rows = daemon.get("/targets", timeout=120).json()["data"]
    start, elapsed = marks[0]["ts"], marks[-1]["ts"] - marks[0]["ts"]
    expected = elapsed / INTERVAL
    answered = [
        sum(start <= t <= start + elapsed for t in times.get(i, [])) for i in range(healthy)
    ]
    return {
        "targets": len(urls),
        "success_ratio": min(1.0, sum(answered) / (expected * healthy)),
        "worst_target_ratio": min(answered) / expected,
        "log_bytes_first": marks[0]["log"],
        "first_minute": _window(marks[0], marks[1], health),
        "after": _window(marks[1], marks[2], health),
        "peak_rss_mib": rss,
        "up": sum(bool(r["up"]) for r in rows),
        "refused": sum(r["error_reason"] == "conn_refused" for r in rows),
    }


def _mark(daemon: Daemon) -> dict[str, float]:
    """Time, CPU and log size of the daemon now."""
    log, cpu = daemon.log.stat().st_size, cpu_seconds(daemon.pid)
    return {"ts": time.monotonic(), "cpu": cpu, "log": log}


def _window(a: dict[str, float], b: dict[str, float], health: list[tuple[float, float]]) -> dict:
    """CPU, log bytes and /healthz latency between two marks."""
    seconds = b["ts"] - a["ts"]
    latencies = [ms for when, ms in health if a["ts"] <= when < b["ts"]]
    return {
        "cpu_per_second": (b["cpu"] - a["cpu"]) / seconds,
        "log_bytes_per_minute": (b["log"] - a["log"]) * 60 / seconds,
        "healthz_p50_ms": percentile(latencies, 0.5),
        "healthz_p99_ms": percentile(latencies, 0.99),
    }


def run(targets: int, healthy: int, seconds: float) -> dict[str, Any]:
    first, control, pages = start_pages(healthy)
    try:
        answering = [f"http://127.0.0.1:{p}" for p in range(first, first + healthy)]
        skip = set(range(first, first + healthy))
        refused = [f"http://127.0.0.1:{p}" for p in closed_ports(targets - healthy, skip)]
        with tempfile.TemporaryDirectory() as tmp:
            alone = phase(answering, control, healthy, seconds, Path(tmp) / "alone")
            mixed = phase(answering + refused, control, healthy, seconds, Path(tmp) / "mixed")
    finally:
        pages.terminate()
        pages.wait()
    return {"seconds": seconds, "interval": INTERVAL, "alone": alone, "mixed": mixed}


def report(result: dict[str, Any]) -> None:
    alone, mixed = result["alone"], result["mixed"]
    print(f"{result['seconds']:.0f} s after a 10 s warm-up, interval {result['interval']:g} s; "
          f"first minute: every target tried every interval")  # fmt: skip
    print(f"| | {alone['targets']:,} answering alone | {mixed['targets']:,} "
          f"({mixed['targets'] - alone['targets']:,} refusing) |")  # fmt: skip
    print("|---|---:|---:|")
    rows = [
        ("answering targets' scrapes made", lambda r: f"{r['success_ratio']:.1%}"),
        ("worst answering target", lambda r: f"{r['worst_target_ratio']:.1%}"),
        ("log bytes, warm-up (each target's first state)", lambda r: f"{r['log_bytes_first']:,}"),
    ]
    for window in ("first_minute", "after"):
        when = window.replace("_", " ")
        rows += [
            (f"daemon CPU s/s, {when}", lambda r, w=window: f"{r[w]['cpu_per_second']:.2f}"),
            (f"/healthz p50 ms, {when}", lambda r, w=window: f"{r[w]['healthz_p50_ms']:.1f}"),
            (f"/healthz p99 ms, {when}", lambda r, w=window: f"{r[w]['healthz_p99_ms']:.1f}"),
            (f"log bytes per minute, {when}",
             lambda r, w=window: f"{r[w]['log_bytes_per_minute']:,.0f}"),
        ]  # fmt: skip
    rows += [
        ("peak RSS MiB", lambda r: f"{r['peak_rss_mib']:.0f}"),
        ("targets up / refused at the end", lambda r: f"{r['up']:,} / {r['refused']:,}"),
    ]
    for title, cell in rows:
        print(f"| {title} | {cell(alone)} | {cell(mixed)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--healthy", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=180.0)
    args = parser.parse_args()
    result = run(args.targets, args.healthy, args.seconds)
    report(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
