"""`sglang-tuner check URL…`: watch servers a while (with a progress bar), then print advice;
`sglang-tuner check --log FILE`: replay a log's history through the rules and print it at once."""

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

from sglang_tuner.api.advice_report import AdviceFilter, select_advice
from sglang_tuner.api.advice_text import advice_text
from sglang_tuner.cli.logsetup import configure_logging
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import Evaluation
from sglang_tuner.loop.replay import replay
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.model.signals import CRASH_EVENT_SIGNALS
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.log.history import LogSample, log_samples

# SGLang's own endpoints: what a user may paste (from a Prometheus target, a curl line) instead
# of the server's base URL. Anything before them is the base (it may be a proxy's path prefix).
_ENDPOINT = re.compile(r"/(?:metrics|server_info|get_server_info|health(?:_generate)?|v1)(?:/.*)?$")


def server_url(text: str) -> tuple[str, str | None]:
    """The SGLang base URL `text` means, and a note when it was not one; ValueError if unusable."""
    url = text if "://" in text else f"http://{text}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or re.search(r"\s", text):
        raise ValueError(f"{text!r} is not a server URL; give one like http://gpu-1:30000")
    path = _ENDPOINT.sub("", parts.path).rstrip("/")
    base = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    return base, (None if base == text.rstrip("/") else f"{text} -> watching the server {base}")


def check_settings(args: argparse.Namespace) -> Settings:
    """Settings for a short watch: the whole watch is the window, advice fires without a hold."""
    interval = max(0.2, args.interval or 2.0)
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
    """Watch (or replay a log), print the advice; exit 1 when no server could be scraped at
    all or the log held no SGLang lines, 2 on a bad URL or an unreadable log."""
    if args.log is not None:
        if args.urls:
            print("error: give server URLs or --log, not both", file=sys.stderr)
            return 2
        return run_check_log(args)
    if not args.urls:
        print("error: give one or more server URLs, or --log FILE", file=sys.stderr)
        return 2
    try:
        urls = [server_url(u) for u in args.urls]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for _, note in urls:
        if note:
            print(note, file=sys.stderr)
    args.urls = [u for u, _ in urls]
    settings = check_settings(args)
    configure_logging("warning")
    print(f"watching {len(args.urls)} server(s) for {args.duration:g}s ...", file=sys.stderr)
    ev = asyncio.run(_watch(settings, args.duration, sys.stderr.isatty()))
    _print(ev, settings, args.format)
    return 0 if any(t.last_success_ts for t in ev.targets.values()) else 1


def _print(ev: Evaluation, settings: Settings, fmt: str) -> None:
    report = select_advice(
        ev, AdviceFilter(full_no_data=True), None, settings.scrape_interval_seconds
    )
    if fmt == "json":
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(advice_text(report), end="")


def log_settings(args: argparse.Namespace) -> Settings:
    """Settings for a replay: the window ends at the log's end, advice fires without a hold."""
    interval = max(0.5, args.interval or 5.0)
    return load_settings(
        None,
        {
            "scrape_interval_seconds": interval,
            # judged once a window of log time (and at the end): with no hold, only the
            # judgement at the log's end decides what fires; crashes and flags are kept anyway
            "evaluation_interval_seconds": max(interval, args.window),
            "window_seconds": max(args.window, interval * 3),
            "min_samples": 3,
            "hold_for_seconds": 0.0,
            "keep_firing_for_seconds": 0.0,
        },
    )


def _lines(handle: IO[bytes], chunk_bytes: int = 4 << 20) -> Iterator[str]:
    """Lines of a byte stream as text, undecodable bytes replaced (a log is mostly ASCII);
    read a few MiB at a time and split at "\\n" in C."""
    carry = b""
    while chunk := handle.read(chunk_bytes):
        head, _, carry = (carry + chunk).rpartition(b"\n")
        yield from head.decode("utf-8", errors="replace").split("\n")
    if carry:
        yield from carry.decode("utf-8", errors="replace").split("\n")


def run_check_log(args: argparse.Namespace) -> int:
    """Replay one log (a file, or - for standard input) and print the advice at its end."""
    settings = log_settings(args)
    name = "stdin" if args.log == "-" else Path(args.log).name
    spec = TargetSpec(name=name, url=f"log:{args.log}", profile=args.profile)
    show = sys.stderr.isatty()

    def progress(lines: int, seconds: float) -> None:
        if show:
            sys.stderr.write(f"\r{lines:,} lines, {seconds / 60:,.0f} min of log time ")
            sys.stderr.flush()

    try:
        handle = sys.stdin.buffer if args.log == "-" else open(args.log, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"error: cannot read {args.log}: {exc.strerror}", file=sys.stderr)
        return 2
    said: list[bool] = []  # whether any sample said anything of SGLang's

    def heard(samples: Iterator[LogSample]) -> Iterator[LogSample]:
        for sample in samples:
            if sample.config is not None or any(
                v for k, v in sample.values.items() if k not in CRASH_EVENT_SIGNALS or v
            ):
                said.append(True)
            yield sample

    with handle:
        samples = log_samples(_lines(handle), settings.scrape_interval_seconds)
        ev = replay(settings, spec, heard(samples), progress)
    if show:
        sys.stderr.write("\n")
    if not said:
        print(f"error: {args.log} holds no SGLang log lines", file=sys.stderr)
        return 1
    _print(ev, settings, args.format)
    return 0
