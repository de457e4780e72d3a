"""Benchmark: the daemon's memory while every scrape brings label values it has never seen.

N targets serve a real SGLang page (the v0.5.23 two-DP-rank fixture) plus S series of a gauge the
daemon reads, each with a label value of B bytes that changes on every scrape (a request id in a
label, say): S x B bytes of label strings per target and scrape that will never come again.
The daemon (`sglang-tuner run`, a real process) scrapes them every interval; its RSS is sampled
every 10 s. Memory the parser keeps between scrapes is bounded in bytes per target, so RSS stays
flat once the windows are full; it rose by about 1 GB over two minutes when the label cache
was bounded in entries only.

    PYTHONPATH=daemon python bench/label_churn.py [--targets 50] [--series 200] [--seconds 120]
"""

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_process import Daemon, cpu_seconds, peak_rss_mib
from page_server import PAGE_A
from scale import free_port_block, rss_kib

PAD = b"x"


class ChurnProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive: /metrics is the page plus series with labels never seen before."""

    def __init__(self, page: bytes, series: int, value_bytes: int, counter: list[int]) -> None:
        self.page, self.series, self.value_bytes, self.counter = page, series, value_bytes, counter
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            self._answer(head.split(b" ", 2)[1] if b" " in head else b"")

    def _answer(self, path: bytes) -> None:
        assert self.transport is not None
        if path != b"/metrics":
            body, status = b"{}", b"404 Not Found"
        else:
            self.counter[0] += 1
            scrape = self.counter[0]
            pad = PAD * max(0, self.value_bytes - 24)
            lines = (
                b'sglang:num_queue_reqs{dp_rank="0",request_id="%d-%d-%s"} 1\n' % (scrape, i, pad)
                for i in range(self.series)
            )
            body, status = self.page + b"".join(lines), b"200 OK"
        head = b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n" % (status, len(body))
        self.transport.write(head + body)


async def serve(first_port: int, count: int, series: int, value_bytes: int) -> None:
    """Listen on `count` ports until killed."""
    loop = asyncio.get_running_loop()
    page, counter = PAGE_A.read_bytes(), [0]
    for port in range(first_port, first_port + count):
        await loop.create_server(
            lambda: ChurnProtocol(page, series, value_bytes, counter), "127.0.0.1", port,
            reuse_address=True,
        )  # fmt: skip
    await asyncio.Event().wait()


def run(targets: int, series: int, value_bytes: int, seconds: float, interval: float) -> dict:
    port = free_port_block(targets)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--targets", str(targets),
         "--series", str(series), "--value-bytes", str(value_bytes)],
    )  # fmt: skip
    time.sleep(2.0)
    config = {
        "targets": [{"url": f"http://127.0.0.1:{p}", "name": f"t{p}"}
                    for p in range(port, port + targets)],
        "scrape_interval_seconds": interval, "scrape_timeout_seconds": interval * 0.8,
        "server_info_interval_seconds": 3600.0,
    }  # fmt: skip
    try:
        with tempfile.TemporaryDirectory() as tmp, Daemon(Path(tmp), config) as daemon:
            samples, cpu0, started = [], cpu_seconds(daemon.pid), time.monotonic()
            while (elapsed := time.monotonic() - started) < seconds:
                samples.append((round(elapsed), rss_kib(daemon.pid) / 1024))
                time.sleep(10.0)
            samples.append((round(time.monotonic() - started), rss_kib(daemon.pid) / 1024))
            rows = daemon.get("/targets").json()["data"]
            up = sum(bool(t["up"]) for t in rows)
            return {
                "targets": targets, "series": series, "value_bytes": value_bytes,
                "interval": interval, "rss_mib": samples, "peak_rss_mib": peak_rss_mib(daemon.pid),
                "cpu_per_second": (cpu_seconds(daemon.pid) - cpu0) / seconds, "up": up,
                "churn_mib_per_minute": targets * series * value_bytes * 60 / interval / 2**20,
            }  # fmt: skip
    finally:
        server.terminate()
        server.wait()


def report(result: dict) -> None:
    samples = result["rss_mib"]
    print(f"{result['targets']} targets, {result['series']} churning series of "
          f"{result['value_bytes']} B each, every {result['interval']:g} s: "
          f"{result['churn_mib_per_minute']:.0f} MiB of new label strings per minute")  # fmt: skip
    print("| seconds | daemon RSS MiB |\n|---:|---:|")
    for elapsed, rss in samples:
        print(f"| {elapsed} | {rss:.0f} |")
    # after the first 30 s the windows and connections are in place: growth from there is leak
    settled = next((rss for elapsed, rss in samples if elapsed >= 30), samples[0][1])
    print(f"RSS at 30 s {settled:.0f} MiB, at the end {samples[-1][1]:.0f} MiB "
          f"({samples[-1][1] - settled:+.0f} MiB), peak {result['peak_rss_mib']:.0f} MiB; "
          f"{result['up']}/{result['targets']} targets up; "
          f"daemon CPU {result['cpu_per_second']:.2f} s/s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--series", type=int, default=200)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the page server's port
    args = parser.parse_args()
    if args.serve:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2
        )
        asyncio.run(serve(args.serve, args.targets, args.series, args.value_bytes))
        return
    result = run(args.targets, args.series, args.value_bytes, args.seconds, args.interval)
    report(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
