"""`sglang-tuner check URL…`: watch servers a while (with a progress bar), then print advice."""

import argparse
import asyncio
import json
import sys
import time

from .advice_report import AdviceFilter, select_advice
from .advice_text import advice_text
from .config import Settings, load_settings
from .evaluation import Evaluation
from .logsetup import configure_logging
from .loop import Tuner


def check_settings(args: argparse.Namespace) -> Settings:
    """Settings for a short watch: the whole watch is the window, advice fires without a hold."""
    interval = max(0.2, args.interval)
    targets = [
        {"url": u, "profile": args.profile, "api_key_env": args.api_key_env} for u in args.urls
    ]
    return load_settings(
        None,
        {
            "targets": targets,
            "scrape_interval_seconds": interval,
            "scrape_timeout_seconds": min(3.0, interval * 0.8),
            "evaluation_interval_seconds": interval,
            "window_seconds": max(args.duration, interval * 3),
            "min_samples": max(3, min(12, int(args.duration / interval / 2))),
            "hold_for_seconds": 0.0,
            "keep_firing_for_seconds": 0.0,
            "server_info_interval_seconds": max(args.duration, 30.0),
        },
    )


def _progress(elapsed: float, total: float, ev: Evaluation) -> str:
    width = 30
    done = min(width, int(width * elapsed / total)) if total else width
    up = sum(1 for t in ev.targets.values() if t.up)
    bar = "#" * done + "." * (width - done)
    counts = f"{up}/{len(ev.targets)} up, {len(ev.advice)} advice"
    return f"\r[{bar}] {elapsed:4.0f}/{total:.0f}s  {counts} "


async def _watch(settings: Settings, duration: float, show_progress: bool) -> Evaluation:
    tuner = Tuner(settings)
    await tuner.start()
    started = time.monotonic()
    try:
        while (elapsed := time.monotonic() - started) < duration:
            if show_progress:
                sys.stderr.write(_progress(elapsed, duration, tuner.state.latest()))
                sys.stderr.flush()
            await asyncio.sleep(min(0.5, duration - elapsed))
        tuner.publish(refresh=True)
    finally:
        await tuner.stop()
    if show_progress:
        sys.stderr.write(_progress(duration, duration, tuner.state.latest()) + "\n")
    return tuner.state.latest()


def run_check(args: argparse.Namespace) -> int:
    """Watch, print the advice; exit 1 when no server could be scraped at all."""
    settings = check_settings(args)
    configure_logging("warning")
    print(f"watching {len(args.urls)} server(s) for {args.duration:g}s ...", file=sys.stderr)
    ev = asyncio.run(_watch(settings, args.duration, sys.stderr.isatty()))
    report = select_advice(
        ev, AdviceFilter(full_no_data=True), None, settings.scrape_interval_seconds
    )
    if args.format == "json":
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(advice_text(report), end="")
    return 0 if any(t.last_success_ts for t in ev.targets.values()) else 1
