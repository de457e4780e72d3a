"""Benchmark: HTTP clients for the scrape path, fetch only, on the same N real-size pages.

Each candidate runs as its own process against one `page_server.py`, scraping all N targets
every interval like the daemon (same headers: plain-text Accept, Accept-Encoding gzip; body
decoded and checked against the 16 MiB cap; no parsing). Candidates take turns, A B C A B C,
so they share the machine's drift; CPU per fetch is the process's CPU over its measured
seconds (after a warm-up of one interval) divided by the fetches it completed.

    PYTHONPATH=daemon python bench/clients.py [--targets 1000] [--seconds 30] [--rounds 2]
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from peer import env, start_pages, stop
from scale import free_port_block

FETCHER = r"""
import asyncio, json, resource, sys, time, zlib
from sglang_tuner.sources.timeout import timeout  # asyncio.timeout on 3.11+
kind, urls = sys.argv[1], json.loads(sys.argv[2])
interval, seconds = float(sys.argv[3]), float(sys.argv[4])
HEADERS = {"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}
CAP = 16 * 1024 * 1024

if kind == "httpx":
    import httpx
    def make():
        ctx = httpx.create_ssl_context()
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=2)
        return lambda: httpx.AsyncClient(limits=limits, verify=ctx, follow_redirects=False)
    async def fetch(client, url):
        async with client.stream("GET", url, headers=HEADERS, timeout=3.0) as response:
            size, chunks = 0, []
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > CAP:
                    raise ValueError("too large")
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)
elif kind == "aiohttp":
    import aiohttp
    def make():
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=4, keepalive_timeout=60)
        session = aiohttp.ClientSession(connector=connector, skip_auto_headers=("User-Agent",))
        return lambda: session  # one session: its pool is a dict per host, O(1) per request
    async def fetch(session, url):
        async with session.get(url, headers=HEADERS, allow_redirects=False) as response:
            size, chunks = 0, []
            async for chunk in response.content.iter_any():
                size += len(chunk)
                if size > CAP:
                    raise ValueError("too large")
                chunks.append(chunk)
            return response.status, b"".join(chunks)
else:
    from sglang_tuner.sources.http import HttpClient
    def make():
        return HttpClient
    async def fetch(client, url):
        response = await client.get(url, HEADERS, max_body_bytes=CAP)
        return response.status, response.body

async def one(client, url, start, counts):
    offset = (zlib.crc32(url.encode()) % 1000) / 1000 * interval  # as the daemon spreads them
    await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
    while True:
        began = time.monotonic()
        try:
            async with timeout(3.0):
                status, body = await fetch(client, url + "/metrics")
            counts["ok" if status == 200 and len(body) > 50000 else "bad"] += 1
        except Exception:
            counts["failed"] += 1
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))

async def main():
    factory = make()
    clients = [factory() for _ in urls]
    start = time.monotonic()
    counts = {"ok": 0, "bad": 0, "failed": 0}
    tasks = [asyncio.create_task(one(c, u, start, counts)) for c, u in zip(clients, urls)]
    await asyncio.sleep(interval)  # warm-up: every target fetched once, connections open
    before, cpu0, t0 = dict(counts), time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    cpu, elapsed = time.process_time() - cpu0, time.monotonic() - t0
    done = {k: counts[k] - before[k] for k in counts}
    for task in tasks:
        task.cancel()
    print(json.dumps({"cpu": cpu, "elapsed": elapsed, **done}))

resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
asyncio.run(main())
"""
CANDIDATES = ("httpx", "aiohttp", "sglang_tuner.sources.http")


def fetch_run(kind: str, urls: list[str], interval: float, seconds: float) -> dict[str, float]:
    args = [sys.executable, "-c", FETCHER, kind, json.dumps(urls), str(interval), str(seconds)]
    out = subprocess.run(args, capture_output=True, text=True, env=env(), check=True)
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="clients-"))
    port, control = free_port_block(args.targets), free_port_block(1, 19300)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(args.targets)]
    server = start_pages(tmp, port, args.targets, control, args.interval)
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in CANDIDATES}
    try:
        for round_ in range(args.rounds):
            for kind in CANDIDATES:
                print(f"round {round_ + 1}: {kind} ...", flush=True)
                runs[kind].append(fetch_run(kind, urls, args.interval, args.seconds))
    finally:
        stop(server)
        shutil.rmtree(tmp, ignore_errors=True)
    report(runs, args.targets, args.interval)


def report(runs: dict[str, list[dict[str, float]]], targets: int, interval: float) -> None:
    print(f"\n{targets} targets every {interval:g}s, fetch + gunzip only; ms of CPU per fetch")
    print(f"  {'client':28}{'per round':>24}{'median':>9}{'CPU % core':>12}{'failed':>8}")
    base = None
    for kind, rounds in runs.items():
        per = [1000 * r["cpu"] / max(1.0, r["ok"]) for r in rounds]
        share = statistics.median(r["cpu"] / r["elapsed"] for r in rounds)
        failed = sum(int(r["failed"] + r["bad"]) for r in rounds)
        med = statistics.median(per)
        base = base or med
        cells = " ".join(f"{p:.3f}" for p in per)
        print(
            f"  {kind:28}{cells:>24}{med:>9.3f}{share:>11.1%}{failed:>8}   {med / base:.2f}x httpx"
        )
    print(json.dumps(runs))


if __name__ == "__main__":
    main()
