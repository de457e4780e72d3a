"""Benchmark: the daemon next to Prometheus, both scraping the same N real-size SGLang pages.

One server process (`page_server.py`) serves the 686-line v0.5.23 two-DP-rank page on N ports;
Prometheus (the Debian package, its own config and a temporary TSDB) and `sglang-tuner run`
(default settings: windows, rules, evaluation, SQLite) scrape all N every interval, at the same
time, on the same two cores. Measured over the same seconds, after a warm-up:
- CPU of each process from /proc/<pid>/stat, divided by the scrapes the server counted for it
  (by User-Agent): CPU per scrape, and the daemon / Prometheus ratio;
- missed scrapes: per target, a gap between two scrapes over 1.5 intervals (or at either end of
  the window) counts the scrapes that should have fallen in it;
- RSS per target: the daemon's RSS with N targets minus its RSS with none, over N; Prometheus's
  whole RSS over N.

    PYTHONPATH=daemon python bench/peer.py [--targets 1000] [--seconds 60] [--warmup 30]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import yaml
from scale import cpu_seconds, free_port_block, rss_kib

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "daemon")}


def write_server_info(path: Path) -> None:
    """A v0.5.23 /server_info body as the simulator renders it."""
    from sglang_sim.model import ServerModel
    from sglang_sim.scenarios import SCENARIOS
    from sglang_sim.server_info import server_info

    model = ServerModel(SCENARIOS["healthy"].for_version("0.5.23"), seed=1)
    path.write_text(json.dumps(server_info(model, 30000, None)))


def wait_until(what: str, ok: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ok():  # type: ignore[operator]
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not start")


def start_pages(
    tmp: Path, port: int, count: int, control: int, interval: float
) -> subprocess.Popen[bytes]:
    info = tmp / "server_info.json"
    write_server_info(info)
    cmd = [sys.executable, str(BENCH / "page_server.py"), "--port", str(port),
           "--count", str(count), "--control", str(control), "--interval", str(interval),
           "--server-info", str(info)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env())
    wait_until("page server", lambda: httpx.get(f"http://127.0.0.1:{port + count - 1}/health"))
    return proc


def start_prometheus(tmp: Path, urls: list[str], interval: float) -> subprocess.Popen[bytes]:
    port = free_port_block(1, 19100)
    config = {
        "global": {"scrape_interval": f"{interval:g}s", "scrape_timeout": "3s"},
        "scrape_configs": [
            {"job_name": "sglang", "static_configs": [{"targets": [u[7:] for u in urls]}]}
        ],
    }
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    cmd = ["prometheus", f"--config.file={tmp / 'prometheus.yml'}",
           f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
           "--log.level=warn"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until("prometheus", lambda: httpx.get(f"http://127.0.0.1:{port}/-/ready").is_success)
    return proc


def start_daemon(tmp: Path, urls: list[str], interval: float) -> subprocess.Popen[bytes]:
    port = free_port_block(1, 19200)
    config = {
        "targets": [{"url": u, "name": f"t{i}"} for i, u in enumerate(urls)],
        "scrape_interval_seconds": interval,
        "listen_host": "127.0.0.1",
        "listen_port": port,
        "database": str(tmp / f"tuner-{len(urls)}.db"),
        "log_level": "warning",
    }
    if not urls:  # nothing to watch yet: an empty file_sd file, or `run` refuses to start
        (tmp / "none.json").write_text("[]")
        config["file_sd"] = [{"files": [str(tmp / "none.json")]}]
    path = tmp / f"tuner-{len(urls)}.yml"
    path.write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(path)]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until("daemon", lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").is_success)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def empty_daemon_rss(tmp: Path, interval: float) -> int:
    """RSS of the daemon with no target (the fixed part)."""
    proc = start_daemon(tmp, [], interval)
    time.sleep(3)
    rss = rss_kib(proc.pid)
    stop(proc)
    return rss


@dataclass
class Measured:
    """Raw measurements: the window, CPU seconds and RSS per process, scrape times per agent."""

    t0: float
    t1: float
    cpu: dict[str, float]
    rss: dict[str, int]
    rss_empty: int
    times: dict[str, dict[str, list[float]]]
    page_lines: int
    page_bytes: int


def measure(
    procs: dict[str, subprocess.Popen[bytes]], control: str, seconds: float, rss_empty: int
) -> Measured:
    """CPU of every process over `seconds`, then the server's scrape times and each RSS."""
    t0 = time.monotonic()
    cpu0 = {name: cpu_seconds(p.pid) for name, p in procs.items()}
    time.sleep(seconds)
    cpu1 = {name: cpu_seconds(p.pid) for name, p in procs.items()}
    t1 = time.monotonic()
    counts = httpx.get(control + "/counts", timeout=30).json()
    rss = {name: rss_kib(p.pid) for name, p in procs.items()}
    cpu = {name: cpu1[name] - cpu0[name] for name in procs}
    lines, size = counts["page_lines"], counts["page_bytes"]
    return Measured(t0, t1, cpu, rss, rss_empty, counts["times"], lines, size)


def run(targets: int, seconds: float, warmup: float, interval: float) -> Measured:
    """Start the page server, Prometheus and the daemon; measure; stop them all."""
    tmp = Path(tempfile.mkdtemp(prefix="peer-"))
    port, control_port = free_port_block(targets), free_port_block(1, 19300)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(targets)]
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        rss_empty = empty_daemon_rss(tmp, interval)
        procs["server"] = start_pages(tmp, port, targets, control_port, interval)
        procs["prometheus"] = start_prometheus(tmp, urls, interval)
        procs["daemon"] = start_daemon(tmp, urls, interval)
        print(f"{targets} targets: warming up {warmup:g}s, measuring {seconds:g}s ...", flush=True)
        time.sleep(warmup)
        return measure(procs, f"http://127.0.0.1:{control_port}", seconds, rss_empty)
    finally:
        for proc in reversed(procs.values()):
            stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)


def missed(times: list[float], t0: float, t1: float, interval: float) -> int:
    """Scrapes that should have happened in [t0, t1] but did not (gaps over 1.5 intervals)."""
    inside = [t for t in times if t0 <= t <= t1]
    edges = [t0 - interval / 2, *inside, t1 + interval / 2]
    return sum(
        max(0, round((b - a) / interval) - 1) for a, b in zip(edges, edges[1:], strict=False)
    )


@dataclass
class Figures:
    """One scraper's figures over the measured seconds."""

    agent: str
    scrapes: int
    missed: int
    cpu_seconds: float
    rss_kib: int
    rss_kib_per_target: float
    seconds: float

    @property
    def cpu_share(self) -> float:
        return self.cpu_seconds / self.seconds

    @property
    def ms_per_scrape(self) -> float:
        return 1000 * self.cpu_seconds / max(1, self.scrapes)


def figures(m: Measured, agent: str, name: str, targets: int, interval: float) -> Figures:
    lists = [m.times[agent].get(str(i), []) for i in range(targets)]
    scrapes = sum(1 for times in lists for t in times if m.t0 <= t <= m.t1)
    lost = sum(missed(times, m.t0, m.t1, interval) for times in lists)
    rss = m.rss[name]
    per_target = (rss - m.rss_empty) / targets if name == "daemon" else rss / targets
    return Figures(agent, scrapes, lost, m.cpu[name], rss, per_target, m.t1 - m.t0)


def summarise(m: Measured, targets: int, interval: float) -> dict[str, Figures]:
    """Prometheus's and the daemon's figures; the daemon is the other agent that scraped most."""
    prometheus = next(a for a in m.times if a.startswith("Prometheus"))
    others = [a for a in m.times if a != prometheus]
    daemon = max(others, key=lambda a: sum(len(t) for t in m.times[a].values()))
    return {
        "prometheus": figures(m, prometheus, "prometheus", targets, interval),
        "daemon": figures(m, daemon, "daemon", targets, interval),
    }


def report(m: Measured, result: dict[str, Figures], targets: int, interval: float) -> None:
    print(f"\n{targets} targets every {interval:g}s, {m.t1 - m.t0:.0f}s measured; page "
          f"{m.page_lines} lines, {m.page_bytes:,} bytes (served gzipped)")  # fmt: skip
    print(f"  {'':12}{'CPU, % core':>12}{'ms/scrape':>11}{'scrapes':>9}{'missed':>8}"
          f"{'RSS MiB':>9}{'KiB/target':>12}  User-Agent")  # fmt: skip
    for name, f in result.items():
        cpu = f"{f.cpu_share:>11.1%} {f.ms_per_scrape:>10.3f}{f.scrapes:>9}{f.missed:>8}"
        print(f"  {name:12}{cpu}{f.rss_kib / 1024:>9.0f}{f.rss_kib_per_target:>12.1f}  {f.agent}")
    ratio = result["daemon"].ms_per_scrape / result["prometheus"].ms_per_scrape
    server = m.cpu["server"] / (m.t1 - m.t0)
    print(f"  daemon / Prometheus, CPU per scrape: {ratio:.2f}x (page server: {server:.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=5.0)
    args = parser.parse_args()
    measured = run(args.targets, args.seconds, args.warmup, args.interval)
    result = summarise(measured, args.targets, args.interval)
    report(measured, result, args.targets, args.interval)
    rows = {name: {**asdict(f), "ms_per_scrape": f.ms_per_scrape} for name, f in result.items()}
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
