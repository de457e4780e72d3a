"""`sglang-tuner demo`: simulated SGLang servers, the daemon watching them, advice as it appears.

It runs until Ctrl-C (or SIGTERM, or `--duration`), then prints the final advice and exits 0;
a second Ctrl-C while it stops, or one during start-up, exits 130 at once.
"""

import argparse
import asyncio
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from sglang_sim import ServerSpec, SimFleet

from sglang_tuner.api.advice_report import AdviceFilter, select_advice
from sglang_tuner.api.advice_text import advice_text
from sglang_tuner.cli.logsetup import configure_logging
from sglang_tuner.cli.run import ApiThread, build
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.settings import Settings, listen_endpoints
from sglang_tuner.evaluation import Evaluation
from sglang_tuner.model.versions import NEWEST_KNOWN

SCENARIOS = (
    "healthy",
    "client_too_slow",
    "queue_flood",
    "scheduler_too_conservative",
    "retraction_storm",
)
VERSION = NEWEST_KNOWN  # the simulated servers run the newest release modelled


# Ctrl-C and SIGTERM end the watch: the final advice is printed and the demo exits 0.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
GPU = "NVIDIA H100 80GB HBM3"  # the simulated GPU; a real node would give dcgm_url instead


def demo_settings(urls: list[str], port: int, tmp: Path) -> Settings:
    """Short windows so advice shows within a minute (production defaults are much longer)."""
    targets = [
        {
            "url": url,
            "name": f"sim-{scenario}",
            "log_file": str(_log_file(tmp, scenario)),
            "gpu_model": GPU,
            "profile": "offline",  # the simulated clients are batch jobs (unset: inferred)
        }
        for scenario, url in zip(SCENARIOS, urls, strict=True)
    ]
    return load_settings(
        None,
        {
            "targets": targets,
            "scrape_interval_seconds": 2.0,
            "scrape_timeout_seconds": 1.5,
            "evaluation_interval_seconds": 2.0,
            "window_seconds": 120.0,
            "min_samples": 6,
            "hold_for_seconds": 10.0,
            "keep_firing_for_seconds": 30.0,
            "server_info_interval_seconds": 60.0,
            "listen_host": "127.0.0.1",
            "listen_port": port,
            "database": tmp / "demo.db",
        },
    )


def _banner(settings: Settings, duration: float) -> None:
    base = f"http://127.0.0.1:{settings.listen_port}"
    print("sglang-tuner demo: 5 simulated SGLang servers (version 0.5.23) and the daemon.")
    print("Demo settings: scrape every 2 s, 2 min windows, advice fires after holding 10 s")
    print("(production defaults: 5 s, 5 min windows, 2 min hold).")
    print(f"  advice:   curl '{base}/advice?format=text'   (JSON without ?format=text)")
    print(f"  targets:  curl {base}/targets")
    print(f"  metrics:  curl {base}/metrics")
    print(f"  API docs: {base}/docs")
    until = f"{duration:g} s or Ctrl-C" if duration > 0 else "Ctrl-C"
    print(f"Watching; advice appears below as it turns pending and firing ({until} stops).\n")


async def _follow(
    latest: Callable[[], Evaluation], started: float, duration: float, stop: asyncio.Event
) -> None:
    seen: set[tuple[str, str, str]] = set()
    while not stop.is_set() and (duration <= 0 or time.monotonic() - started < duration):
        with suppress(asyncio.TimeoutError):  # not the built-in TimeoutError on Python 3.10
            await asyncio.wait_for(stop.wait(), 1.0)
        for a in latest().advice:
            key = (a.target, a.rule, a.state)
            if key not in seen:
                seen.add(key)
                stamp = f"{time.monotonic() - started:5.0f}s"
                print(f"[{stamp}] {a.state.upper():8} {a.target:<32} {a.rule}: {a.action.text}")


async def _run(settings: Settings, duration: float) -> str:
    tuner, server, _ = build(settings)
    await tuner.start()
    api = ApiThread(server, listen_endpoints(settings))
    started = time.monotonic()
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    _banner(settings, duration)  # after the handlers: "Ctrl-C stops" is true once printed
    try:
        await asyncio.to_thread(api.start)
        await _follow(tuner.state.latest, started, duration, stop)
    finally:
        for signum in STOP_SIGNALS:  # a second Ctrl-C while stopping interrupts at once
            loop.remove_signal_handler(signum)
        await asyncio.to_thread(api.stop)
        await tuner.stop()
    ev = tuner.state.latest()
    full = AdviceFilter(full_no_data=True)
    report = select_advice(ev, full, None, settings.scrape_interval_seconds)
    return advice_text(report, ev.targets, one_shot=True)


def run_demo(args: argparse.Namespace) -> int:
    """Start the fleet and the daemon; print advice as it appears, then the full report."""
    configure_logging("warning")
    if not _port_free(args.port):
        print(f"error: port {args.port} is in use; pick another with --port", file=sys.stderr)
        return 2
    try:
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            specs = [ServerSpec(s, VERSION, log_file=str(_log_file(tmp, s))) for s in SCENARIOS]
            return _run_with_fleet(specs, args, tmp)
    except KeyboardInterrupt:  # while starting, or a second Ctrl-C while stopping
        print("\ninterrupted", file=sys.stderr)
        return 130


def _run_with_fleet(specs: list[ServerSpec], args: argparse.Namespace, tmp: Path) -> int:
    # Five simulated minutes before the first scrape: the servers are in their steady state.
    with SimFleet(specs, seed=1, warmup_seconds=300.0) as fleet:
        settings = demo_settings(list(fleet.urls), args.port, tmp)
        report = asyncio.run(_run(settings, args.duration))
    print("\nFinal advice (GET /advice?format=text gives the same, every server listed):\n")
    print(report, end="")
    return 0


def _log_file(tmp: Path, scenario: str) -> Path:
    return tmp / f"sglang-{scenario}.log"


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
