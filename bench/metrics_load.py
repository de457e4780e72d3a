"""Benchmark: the daemon's own `/metrics` read in a loop at 10,000 targets, while it scrapes.

N targets, of which H answer (bench/page_server.py: a real-size SGLang page on H ports) and the
rest refuse connections (as in bench/refused.py: a large fleet where most servers are down is
where the exposition is largest per scrape made). One daemon (`sglang-tuner run`, a real
process) runs two phases of S seconds each, measured in the same run:
- baseline: nobody reads `/metrics`;
- loaded: a reader GETs `/metrics` back to back (as gzip when `--gzip`, as Prometheus asks).
For each phase: the answering targets' scrapes made vs the schedule, the daemon's CPU seconds
per second; for the loaded phase: GET `/metrics` time (p50, max), body size, series count.

With `--compare-with REF` the same phases run first on that git revision's daemon (checked out
in a temporary worktree), so a change is measured against its baseline in the same run.

    PYTHONPATH=daemon python bench/metrics_load.py [--targets 10000] [--healthy 100]
        [--seconds 60] [--gzip] [--compare-with REF]
"""

import argparse
import json
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import bench_process
import httpx
from bench_process import ROOT, Daemon, cpu_seconds, peak_rss_mib, percentile
from refused import INTERVAL, closed_ports, scrape_times, start_pages


def reader(url: str, gzip: bool, stop: threading.Event, out: dict[str, Any]) -> None:
    """GET /metrics back to back until `stop`; per GET: seconds, bytes on the wire, lines."""
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    with httpx.Client(base_url=url, timeout=120) as client:
        while not stop.is_set():
            began = time.perf_counter()
            with client.stream("GET", "/metrics", headers=headers) as response:
                wire = sum(len(chunk) for chunk in response.iter_raw())
                out["encoding"] = response.headers.get("content-encoding", "identity")
            out["seconds"].append(time.perf_counter() - began)
            out["wire_bytes"].append(wire)
            if not out.get("lines"):
                text = client.get("/metrics", headers={"Accept-Encoding": "identity"}).text
                out["lines"] = sum(1 for line in text.splitlines() if not line.startswith("#"))
                out["plain_bytes"] = len(text.encode())


def ratio_between(times: dict[int, list[float]], healthy: int, a: float, b: float) -> dict:
    """Scrapes of the answering targets made between two monotonic marks vs the schedule."""
    expected = (b - a) / INTERVAL
    made = [sum(a <= t <= b for t in times.get(i, [])) for i in range(healthy)]
    return {"ratio": min(1.0, sum(made) / (expected * healthy)), "worst": min(made) / expected}


def run(targets: int, healthy: int, seconds: float, gzip: bool) -> dict[str, Any]:
    first, control, pages = start_pages(healthy)
    try:
        answering = [f"http://127.0.0.1:{p}" for p in range(first, first + healthy)]
        refused = [f"http://127.0.0.1:{p}" for p in
                   closed_ports(targets - healthy, set(range(first, first + healthy)))]  # fmt: skip
        urls = answering + refused
        config = {
            "targets": [{"url": url, "name": f"t{i}"} for i, url in enumerate(urls)],
            "log_level": "warning",
            "scrape_interval_seconds": INTERVAL,
        }
        with tempfile.TemporaryDirectory() as tmp, Daemon(Path(tmp), config) as daemon:
            time.sleep(2 * INTERVAL)  # every target scraped (or refused) once
            t0, cpu0 = time.monotonic(), cpu_seconds(daemon.pid)
            time.sleep(seconds)
            t1, cpu1 = time.monotonic(), cpu_seconds(daemon.pid)
            stop, got = threading.Event(), {"seconds": [], "wire_bytes": []}
            thread = threading.Thread(target=reader, args=(daemon.url, gzip, stop, got))
            thread.start()
            time.sleep(seconds)
            t2, cpu2 = time.monotonic(), cpu_seconds(daemon.pid)
            stop.set()
            thread.join(300)
            rss = peak_rss_mib(daemon.pid)
            times = scrape_times(control)
    finally:
        pages.terminate()
        pages.wait()
    return {
        "targets": targets,
        "healthy": healthy,
        "seconds": seconds,
        "gzip": gzip,
        "baseline": {**ratio_between(times, healthy, t0, t1), "cpu": (cpu1 - cpu0) / (t1 - t0)},
        "loaded": {**ratio_between(times, healthy, t1, t2), "cpu": (cpu2 - cpu1) / (t2 - t1)},
        "gets": len(got["seconds"]),
        "get_p50_s": percentile(got["seconds"], 0.5) if got["seconds"] else None,
        "get_max_s": max(got["seconds"], default=None),
        "wire_bytes": percentile(got["wire_bytes"], 0.5) if got["wire_bytes"] else None,
        "plain_bytes": got.get("plain_bytes"),
        "series": got.get("lines"),
        "encoding": got.get("encoding"),
        "peak_rss_mib": rss,
    }


def report(r: dict[str, Any]) -> None:
    base, loaded = r["baseline"], r["loaded"]
    print(f"{r['targets']:,} targets ({r['healthy']} answering), {r['seconds']:.0f} s per phase, "
          f"reader {'gzip' if r['gzip'] else 'identity'}")  # fmt: skip
    print("| | nobody reads /metrics | /metrics read in a loop |")
    print("|---|---:|---:|")
    print(f"| answering targets' scrapes made | {base['ratio']:.1%} | {loaded['ratio']:.1%} |")
    print(f"| worst answering target | {base['worst']:.1%} | {loaded['worst']:.1%} |")
    print(f"| daemon CPU s/s | {base['cpu']:.2f} | {loaded['cpu']:.2f} |")
    if r["gets"]:
        print(f"GET /metrics: {r['gets']} in {r['seconds']:.0f} s, p50 {r['get_p50_s']:.2f} s, "
              f"max {r['get_max_s']:.2f} s; {r['series']:,} series, {r['plain_bytes']:,} bytes "
              f"plain, {r['wire_bytes']:,} on the wire ({r['encoding']}); "
              f"peak RSS {r['peak_rss_mib']:.0f} MiB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--healthy", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--gzip", action="store_true", help="ask for gzip, as Prometheus does")
    parser.add_argument("--compare-with", metavar="REF", help="run REF's daemon first (git)")
    args = parser.parse_args()
    results = []
    if args.compare_with:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "baseline"
            git = ["git", "-C", str(ROOT)]
            add = ["worktree", "add", "-q", "--detach", str(tree), args.compare_with]
            subprocess.run([*git, *add], check=True)
            try:
                bench_process.DAEMON_PATH = tree / "daemon"
                print(f"baseline: {args.compare_with}", flush=True)
                results.append(run(args.targets, args.healthy, args.seconds, args.gzip))
                report(results[-1])
            finally:
                bench_process.DAEMON_PATH = ROOT / "daemon"
                subprocess.run([*git, "worktree", "remove", "--force", str(tree)], check=False)
        print("this checkout:", flush=True)
    results.append(run(args.targets, args.healthy, args.seconds, args.gzip))
    report(results[-1])
    print(json.dumps(results))


if __name__ == "__main__":
    main()
