"""Processes for bench/fleet.py: the daemon and the simulator, and what /proc says about them."""

import json
import os
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
MIX = "healthy,scheduler_too_conservative,retraction_storm,client_too_slow,queue_flood,idle"


# The daemon package the benchmark runs: this checkout's, or another build's (an A/B comparison).
DAEMON_PATH = ROOT / "daemon"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(DAEMON_PATH)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mib(pid: int) -> float:
    """The highest resident memory the process has had (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def start_sim(count: int) -> tuple[int, subprocess.Popen[bytes]]:
    """`count` simulated servers on consecutive ports below the ephemeral range."""
    port = 20000
    while not all(_free(p) for p in range(port, port + count)):
        port += count
    cmd = [sys.executable, "-m", "sglang_tuner", "sim", "--scenario", MIX, "--count", str(count),
           "--port", str(port), "--seed", "1", "--warmup", "120"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port + count - 1}/health", timeout=1)
            return port, proc
        except httpx.HTTPError:
            time.sleep(0.5)
    raise RuntimeError("simulator did not start")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Daemon:
    """`sglang-tuner run` with a generated config, as a context manager."""

    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {"listen_host": "127.0.0.1", "listen_port": self.port, "log_level": "warning",
                  "database": str(tmp / "tuner.db"), **config}  # fmt: skip
        (tmp / "config.yml").write_text(yaml.safe_dump(config))
        self.log = tmp / "daemon.log"
        cmd = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(tmp / "config.yml")]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, env=env(), stdout=out, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        self._seen: set[float] = set()
        # One client, its connection kept alive: `httpx.get` builds a client (and loads the CA
        # bundle) per call, ~20 ms of the measuring process's CPU that was timed as latency.
        self._client = httpx.Client(base_url=self.url)
        self.decode_ms: list[float] = []  # per timed /advice: inflating and parsing it here

    def __enter__(self) -> "Daemon":
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.get("/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.25)
        raise RuntimeError(f"daemon did not start: {self.log.read_text()[-2000:]}")

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._client.close()
        self.proc.terminate()
        self.proc.wait(60)

    def get(self, path: str, timeout: float = 10) -> httpx.Response:
        return self._client.get(path, timeout=timeout)

    def evaluations(self) -> int:
        """Evaluations published since this helper first looked (one per round)."""
        self._timed("/advice")
        return len(self._seen)

    def wait_rounds(self, rounds: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.evaluations() < rounds:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"no evaluation in time: {self.log.read_text()[-2000:]}")
            time.sleep(0.5)

    def poll_latency(self, done: Callable[[], bool]) -> tuple[list[float], list[float]]:
        """GET /advice and /healthz every 0.25 s until `done()`; their latencies in ms."""
        advice: list[float] = []
        health: list[float] = []
        while not done():
            advice.append(self._timed("/advice"))
            health.append(self._timed("/healthz"))
            time.sleep(0.25)
        return advice, health

    def _timed(self, path: str) -> float:
        """Milliseconds from sending the request to the answer's last byte, as sent (gzipped
        for /advice); what this client then spends inflating and parsing it is kept apart in
        `decode_ms`."""
        started = time.perf_counter()
        with self._client.stream("GET", path, timeout=30) as response:
            raw = b"".join(response.iter_raw())
        elapsed = (time.perf_counter() - started) * 1000
        if path == "/advice":
            began = time.perf_counter()
            gzipped = response.headers.get("content-encoding") == "gzip"
            body = json.loads(zlib.decompress(raw, 16 + zlib.MAX_WBITS) if gzipped else raw)
            self.decode_ms.append((time.perf_counter() - began) * 1000)
            evaluated = body.get("evaluated_at_ts")
            if evaluated is not None:
                self._seen.add(evaluated)
        return elapsed


def launch_prometheus(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Debian's Prometheus serving the TSDB under `tmp/tsdb` (a backfilled one), scraping
    nothing, on a free port; returns at once (callers wait for what they need: an answer, the
    blocks merged). The log goes to `tmp/prometheus.log`."""
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 30s}\n")
    port = free_port()
    cmd = [
        "prometheus", f"--config.file={tmp / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=1y",
    ]  # fmt: skip
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"
