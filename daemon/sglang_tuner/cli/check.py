"""`sglang-tuner check URL…`: watch servers a while (with a progress bar), then print advice;
`sglang-tuner check --log FILE`: replay a log's history through the rules and print it at once;
`sglang-tuner check --prometheus URL`: judge the stored history of every SGLang server a
Prometheus holds and print the advice at once (`loop/backfill.py` reads and judges it)."""

import argparse
import asyncio
import csv
import io
import json
import os
import re
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

import yaml

from sglang_tuner.api.advice_report import AdviceFilter, select_advice
from sglang_tuner.api.advice_text import advice_text
from sglang_tuner.api.schemas.advice_response import ActionOut, AdviceList
from sglang_tuner.cli.logsetup import configure_logging
from sglang_tuner.config.duration import duration_text
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import Evaluation
from sglang_tuner.loop.backfill import review_all
from sglang_tuner.loop.replay import replay
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.model.advice import Confidence, Finding, NoData, Pass
from sglang_tuner.model.scrape import NOT_SGLANG_REASONS, UNREACHABLE_REASONS
from sglang_tuner.model.signals import CRASH_EVENT_SIGNALS
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.sources.log.log_samples import LogHistory, LogSample
from sglang_tuner.sources.log.messages.catalogue import lookup
from sglang_tuner.sources.prometheus.range_history import History

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


def judged_at_once(step: float, overrides: Mapping[str, object]) -> Settings:
    """A `check`'s settings: a sample every `step` (a scrape gets 80 % of it, 3 s at most),
    judged every step, advice firing and clearing without a hold (the window's verdict);
    `overrides` give the window and what else differs."""
    return load_settings(
        None,
        {
            "scrape_interval_seconds": step,
            "scrape_timeout_seconds": min(3.0, step * 0.8),
            "evaluation_interval_seconds": step,
            "hold_for_seconds": 0.0,
            "keep_firing_for_seconds": 0.0,
            **overrides,
        },
    )


def check_settings(args: argparse.Namespace) -> Settings:
    """Settings for a short watch: the whole watch is the window, advice fires without a hold."""
    interval = max(0.2, args.interval or 2.0)
    targets = [
        {"url": u, "profile": args.profile, "api_key_env": args.api_key_env,
         "gpu_model": args.gpu_model}
        for u in args.urls
    ]  # fmt: skip
    return judged_at_once(
        interval,
        {
            "targets": targets,
            "window_seconds": max(args.duration, interval * 3),
            "min_samples": max(3, min(12, int(args.duration / interval / 2))),
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


# Failures that say, at the first scrape, that watching longer cannot help: nothing listens
# there, or what answers is not an SGLang server's /metrics.
_FINAL_REASONS = UNREACHABLE_REASONS | NOT_SGLANG_REASONS | {"http_404_metrics_disabled"}
_FINAL_REASONS |= {"http_4xx"}


def known_failures(tuner: Tuner) -> dict[str, str] | None:
    """Per target, why it cannot be watched, when that is known of every target (none has ever
    answered and each last failed for a reason that will not pass); None while any may."""
    why = {}
    for name, server in tuner.watch.servers.items():
        state = server.state
        last = state.last
        if state.last_success_ts is not None or last is None:
            return None
        if last.error_reason not in _FINAL_REASONS:
            return None
        why[name] = f"{last.error_reason}: {last.error}" + _hint(state.spec.url, last.error)
    return why or None


def _hint(url: str, error: str | None) -> str:
    """What to run instead, where the failure says what the URL is."""
    error = error or ""
    if "prometheus_*" in error or "401" in error:
        what = "Prometheus's own /metrics" if "401" not in error else "asks for credentials"
        return (
            f"\n  ({what}: for the history of the SGLang servers a Prometheus scrapes, run "
            f"sglang-tuner check --prometheus {url}; SGLang's /metrics needs no credentials)"
        )
    if "404" in error:
        return "\n  (give the SGLang server's own address, e.g. http://gpu-1:30000)"
    return ""


async def _watch(
    settings: Settings, duration: float, show_progress: bool
) -> tuple[Evaluation, dict[str, str] | None]:
    """The evaluation after `duration`, or (sooner) why no target can be watched at all."""
    tuner = Tuner(settings)
    await tuner.start()
    started = time.monotonic()
    failed = None
    try:
        # every server once at once (its own job starts later in the interval): a refused
        # connection or a wrong page is known at the first scrape
        await asyncio.gather(*(tuner.scrape(name) for name in list(tuner.watch.servers)))
        while (elapsed := time.monotonic() - started) < duration:
            if (failed := known_failures(tuner)) is not None:
                break
            if show_progress:
                sys.stderr.write(_progress(elapsed, duration, tuner.state.latest()))
                sys.stderr.flush()
            await asyncio.sleep(min(0.5, duration - elapsed))
        tuner.publish(refresh=True)
    finally:
        await tuner.stop()
    if show_progress:
        sys.stderr.write(_progress(duration, duration, tuner.state.latest()) + "\n")
    return tuner.state.latest(), failed


def run_check(args: argparse.Namespace) -> int:
    """Watch (or replay a log), print the advice; exit 1 when no server could be scraped at
    all or the log held no SGLang lines, 2 on a bad URL or an unreadable log."""
    if sum(map(bool, (args.urls, args.log is not None, args.prometheus))) > 1:
        print("error: give server URLs, --log or --prometheus, only one", file=sys.stderr)
        return 2
    if args.prometheus:
        return run_check_prometheus(args)
    if args.log is not None:
        return run_check_log(args)
    if not args.urls:
        print("error: give server URLs, --log FILE or --prometheus URL", file=sys.stderr)
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
    configure_logging("error")  # a server down is said once, below
    watching = f"watching {len(args.urls)} server(s) for up to {duration_text(args.duration)}"
    print(f"{watching} ...", file=sys.stderr)
    ev, failed = asyncio.run(_watch(settings, args.duration, sys.stderr.isatty()))
    if failed is not None:  # known at the first scrape: said at once, not after --duration
        for name, why in failed.items():
            print(f"error: {name}: {why}", file=sys.stderr)
        if args.format not in (None, "text", "table"):  # a script still gets its report
            _print(ev, settings, args.format, explain=args.explain)
        return 1
    _print(ev, settings, args.format, explain=args.explain)
    return 0 if any(t.last_success_ts for t in ev.targets.values()) else 1


def _print(
    ev: Evaluation,
    settings: Settings,
    fmt: str | None,
    history: Mapping[str, str] | None = None,
    explain: bool = False,
) -> None:
    report = select_advice(
        ev, AdviceFilter(full_no_data=True), None, settings.scrape_interval_seconds
    )
    print(report_text(report, fmt or "text", list(ev.targets), history), end="")
    if explain and (fmt or "text") in {"text", "table"}:
        print(explain_text(ev), end="")


def explain_text(ev: Evaluation) -> str:
    """`check --explain`: per server, every rule judged and what it came to: its advice's
    severity, or why it passed (what it weighed, a guard that held it back), or why it could
    not judge."""
    lines = ["", "every rule, per server (--explain):"]
    for target in sorted(ev.results):
        lines.append(f"== {target}")
        for r in sorted(ev.results[target], key=lambda r: r.rule):
            out = r.outcome
            if r.error:
                said = f"error: {r.error}"
            elif isinstance(out, Finding):
                said = f"advice ({out.severity or r.severity}): {out.action.text}"
            elif isinstance(out, NoData):
                said = f"no data: {out.reason}"
            elif isinstance(out, Pass):
                said = "passed" + (f": {out.detail}" if out.detail else "")
            else:
                said = "not judged"
            lines.append(f"  {r.rule}: {said}")
    return "\n".join(lines) + "\n"


def report_text(
    report: AdviceList,
    fmt: str,
    servers: Iterable[str] = (),
    history: Mapping[str, str] | None = None,
) -> str:
    """The report in one of `check`'s formats: text, table, json, yaml or csv; every server
    judged is in it (`servers`), one without advice too; `history`: how much history each
    server was judged on (`check --prometheus`)."""
    if fmt == "json":
        return json.dumps(report.model_dump(mode="json"), indent=2) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(report.model_dump(mode="json"), sort_keys=False))
    if fmt == "table":
        return advice_table(report, servers, history)
    if fmt == "csv":
        return advice_csv(report, history, servers)
    return advice_text(report, servers, one_shot=True)


def log_settings(args: argparse.Namespace) -> Settings:
    """Settings for a replay: the window ends at the log's end, advice fires without a hold."""
    interval = max(0.5, args.interval or 5.0)
    return judged_at_once(
        interval,
        {
            # judged once a window of log time (and at the end): with no hold, only the
            # judgement at the log's end decides what fires; crashes and flags are kept anyway
            "evaluation_interval_seconds": max(interval, args.window),
            "window_seconds": max(args.window, interval * 3),
            "min_samples": 1,
        },
    )


def _lines(handle: IO[bytes], chunk_bytes: int = 4 << 20) -> Iterator[str]:
    """Lines of a byte stream as text, undecodable bytes replaced (a log is mostly ASCII);
    read a few MiB at a time and split at "\\n" in C."""
    carry = b""
    while chunk := handle.read(chunk_bytes):
        head, newline, carry = (carry + chunk).rpartition(b"\n")
        if newline:  # a chunk inside one long line ends none
            yield from head.decode("utf-8", errors="replace").split("\n")
    if carry:
        yield from carry.decode("utf-8", errors="replace").split("\n")


def _last_first(path: str, chunk_bytes: int = 4 << 20) -> Iterator[str]:
    """A file's lines from its last to its first, undecodable bytes replaced: read a few MiB at
    a time from its end (a log listed newest first is put back without holding it)."""
    with open(path, "rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        if not position:
            return
        handle.seek(position - 1)
        position -= handle.read(1) == b"\n"  # the last line's own end is no line after it
        carry = b""
        while position > 0:
            step = min(chunk_bytes, position)
            position -= step
            handle.seek(position)
            lines = (handle.read(step) + carry).split(b"\n")
            carry = lines[0]  # the start of a line the next chunk back ends
            for line in reversed(lines[1:]):
                yield line.decode("utf-8", errors="replace")
        yield carry.decode("utf-8", errors="replace")


def run_check_log(args: argparse.Namespace) -> int:
    """Replay one log (a file, or - for standard input) and print the advice at its end."""
    settings = log_settings(args)
    name = "stdin" if args.log == "-" else Path(args.log).name
    spec = TargetSpec(
        name=name, url=f"log:{args.log}", profile=args.profile, gpu_model=args.gpu_model
    )
    try:
        handle = sys.stdin.buffer if args.log == "-" else open(args.log, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"error: cannot read {args.log}: {exc.strerror}", file=sys.stderr)
        return 2
    said: list[bool] = []  # whether any sample said anything of SGLang's
    with handle:
        end = _log_end(handle)
        backwards = None if args.log == "-" or end[1] is None else partial(_last_first, args.log)
        history = LogHistory(_lines(handle), settings.scrape_interval_seconds, *end, backwards)
        ev = replay(settings, spec, _heard(history.samples(), said), _log_progress)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    if not history.lines:
        print(f"error: {args.log} is empty", file=sys.stderr)
        return 1
    if history.note and said:  # how its time was read, said once (of a log it could read)
        print(f"{name}: {history.note}", file=sys.stderr)
    if not said:
        print(f"error: {args.log} {_unread(args.log)}", file=sys.stderr)
        return 1
    report = select_advice(
        ev, AdviceFilter(full_no_data=True), None, settings.scrape_interval_seconds
    )
    print(report_text(judged_on(report, history, settings), args.format or "text"), end="")
    if args.explain and (args.format or "text") in {"text", "table"}:
        print(explain_text(ev), end="")
    return 0


_SGLANG_WORDS = re.compile(
    r"Decode batch|Prefill batch|#running-req|Retract requests|#retracted_reqs|max_total_num_tokens"
    r"|KV Cache is allocated|Load weight|Capture cuda graph|hit an exception"
)
_UNREAD_LINES = 100_000  # looked through for a line with SGLang's words (a file only)


_ACCESS = re.compile(r'"(?:GET|POST|PUT|DELETE|HEAD|PATCH|OPTIONS) /\S* HTTP/[\d.]+" \d{3}')
_READ = (
    "the rules read the scheduler's Decode/Prefill batch lines, the startup summary and "
    "crashes: paste the lines around them"
)


def _unread(log: str) -> str:
    """Why a log gave nothing, with what it holds all the same (a file; standard input is read
    once): a line with SGLang's words in a form the reader does not know (its number and
    start, so its format can be told); else a line that is one of SGLang's own messages
    (`messages/sglang_messages.json`), or the HTTP server's access lines, neither of which
    carries a tuning signal."""
    none = "holds no SGLang log lines"
    if log == "-":
        return none
    message: tuple[int, str] | None = None
    access: list[int] = []
    try:
        with open(log, "rb") as handle:
            for number, line in enumerate(_lines(handle), 1):
                if number > _UNREAD_LINES:
                    break
                if _SGLANG_WORDS.search(line):
                    return (
                        f"{none} that it can read: line {number} has SGLang's words in a form it "
                        f"does not know ({_start(line)!r}); the forms it reads are listed in "
                        "docs/operations.md (The SGLang log as a source)"
                    )
                if _ACCESS.search(line):
                    access.append(number)
                elif message is None and (found := lookup(line)) is not None:
                    message = number, f"{found.call} in {found.module}, {found.versions}"
    except OSError:
        return none
    if message is not None:
        number, where = message
        return (
            f"holds no line with a tuning signal: line {number} is one of SGLang's own messages "
            f"({where}), but {_READ}"
        )
    if access:
        return (
            f"holds no line with a tuning signal: its SGLang lines are the HTTP server's access "
            f"lines ({len(access)}, from line {access[0]}); {_READ}"
        )
    return none


def _start(line: str) -> str:
    return line.strip()[:100].encode("unicode_escape").decode("ascii")


def _log_progress(lines: int, seconds: float) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(f"\r{lines:,} lines, {seconds / 60:,.0f} min of log time ")
        sys.stderr.flush()


def _heard(samples: Iterator[LogSample], said: list[bool]) -> Iterator[LogSample]:
    """The samples, noting in `said` whether any said anything of SGLang's."""
    for sample in samples:
        if sample.config is not None or any(
            v for k, v in sample.values.items() if k not in CRASH_EVENT_SIGNALS or v
        ):
            said.append(True)
        yield sample


def _log_end(handle: IO[bytes]) -> tuple[float, int | None, str]:
    """Where a log that does not say when it ends ends: a regular file's modification time
    (standard input redirected from one too), else now; with the file's size."""
    try:
        info = os.fstat(handle.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return info.st_mtime, info.st_size, "the file's modification time"
    return time.time(), None, "the time it was read"


def judged_on(report: AdviceList, history: LogHistory, settings: Settings) -> AdviceList:
    """A log shorter than the window is judged all the same: each advice says on how many lines
    and how much log time, and a windowed rule's confidence is low under half a window."""
    first, last = history.first_ts, history.last_ts
    span = last - first if first is not None and last is not None else 0.0
    window = settings.window_seconds
    if span + settings.scrape_interval_seconds >= window:
        return report
    lines = f"{history.lines} line{'' if history.lines == 1 else 's'}"
    said = f"judged on {lines} ({span:.0f} s of log time; a window is {window:.0f} s)"
    windowed = {rule.id for rule in ALL_RULES if rule.needs_window}
    low = span < window / 2
    data = [
        a.model_copy(update={
            "evidence": f"{a.evidence}; {said}" if a.evidence else said,
            "confidence": Confidence.LOW if low and a.rule in windowed else a.confidence,
        })
        for a in report.data
    ]  # fmt: skip
    return report.model_copy(update={"data": data})


# -- check --prometheus: every server's stored history, judged at once ---------------------------
HISTORY_STEP_SECONDS = 15.0  # Prometheus's default scrape interval
HISTORY_SAMPLES = 60  # at most, per window: a longer --since takes a longer step
# Latency quantiles (every bucket series, per step: most of Prometheus's work) every 4th step
# of a window of 40 samples or more, each over 4 steps' rate window: at least 10 per window.
LATENCY_EVERY, LATENCY_EVERY_FROM = 4, 40


def time_of(text: str | None, now: float) -> float:
    """Unix seconds of `--at` (Unix seconds or RFC 3339), `now` when not given."""
    if text is None:
        return now
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"--at {text!r} is neither Unix seconds nor RFC 3339") from None


def history_settings(args: argparse.Namespace, since: float) -> Settings:
    """Settings for judging a history: the whole --since is the window, one sample per step
    (a query step, as the daemon's rounds; 15 s, or --since / 60 if longer), rates over two
    steps (one minute at least); advice fires without a hold (the window's verdict, as the
    other `check`s)."""
    step = args.interval or max(HISTORY_STEP_SECONDS, since / HISTORY_SAMPLES)
    selector = args.selector.strip()
    selector = selector[1:-1] if selector.startswith("{") and selector.endswith("}") else selector
    prometheus = {
        "url": args.prometheus if "://" in args.prometheus else f"http://{args.prometheus}",
        "selector": selector, "profile": args.profile, "api_key_env": args.api_key_env,
        "rate_window_seconds": max(60.0, 2 * step), "timeout_seconds": min(30.0, step * 0.9),
        "backfill": False, "forget_after_seconds": since + step,
        "server_url_template": args.server_url_template or None,
    } | _prometheus_access(args)  # fmt: skip
    return judged_at_once(step, {"prometheus": prometheus, "window_seconds": since})


def _prometheus_access(args: argparse.Namespace) -> dict[str, object]:
    """The auth, tenant and TLS settings the flags give (the unset ones left to the
    environment's SGLANG_TUNER_PROMETHEUS__* variables, as the daemon reads them)."""
    access: dict[str, object] = {}
    if (args.username is None) != (args.password_file is None):
        raise ValueError("--username and --password-file go together (basic auth)")
    if args.username is not None:
        access["basic_auth"] = {"username": args.username, "password_file": args.password_file}
    given = {"bearer_token_file": args.bearer_token_file, "tenant": args.tenant}
    access |= {k: v for k, v in given.items() if v is not None}
    tls = {k: getattr(args, k) for k in ("ca_file", "cert_file", "key_file")}
    tls["insecure_skip_verify"] = args.insecure_skip_verify
    tls = {k: v for k, v in tls.items() if v is not None}
    return access | ({"tls": tls} if tls else {})


class _Progress:
    """A line on stderr once the work takes over a second (rewritten in place on a terminal)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.started = time.monotonic()
        self.shown = False

    async def run(self) -> None:
        await asyncio.sleep(1.0)
        tty = sys.stderr.isatty()
        while True:
            self.shown = True
            elapsed = time.monotonic() - self.started
            sys.stderr.write(f"\r{self.what} {elapsed:4.1f} s " if tty else f"{self.what} ...\n")
            sys.stderr.flush()
            if not tty:
                return
            await asyncio.sleep(0.25)


def latency_every(settings: Settings, since: float) -> int:
    """Every how many steps the latency quantiles are read (1: every step)."""
    samples = since / settings.evaluation_interval_seconds
    return LATENCY_EVERY if samples >= LATENCY_EVERY_FROM else 1


async def _judge_prometheus(settings: Settings, end: float, since: float) -> tuple[Tuner, History]:
    tuner = Tuner(settings, clock=lambda: end)
    await tuner.start(scheduled=False)
    try:
        past = await tuner.judge_history(end, since, latency_every(settings, since))
        if tuner.watch.servers and past.error is None:
            # the flags each server runs with (its /server_info, where its URL is known), then
            # judged again: advice from the values in use, not from SGLang's defaults
            await _read_flags(tuner)
            await review_all(tuner.watch, list(tuner.watch.servers), end)
            tuner.publish()
    finally:
        await tuner.stop()
    return tuner, past


# All /server_info reads together: a fleet unreachable from here (firewalled, cluster-internal
# addresses) costs this once, not a timeout per server.
SERVER_INFO_SECONDS = 3.0


async def _read_flags(tuner: Tuner) -> None:
    """Each server's /server_info, within `SERVER_INFO_SECONDS` for them all; a server not
    read by then is judged on SGLang's defaults, and says why."""
    try:
        await asyncio.wait_for(tuner.refresh_server_info(), SERVER_INFO_SECONDS)
    except asyncio.TimeoutError:  # not the built-in TimeoutError on Python 3.10
        why = f"its /server_info did not answer within {SERVER_INFO_SECONDS:g} s"
        for server in tuner.watch.servers.values():
            if server.state.config is None and server.state.config_error is None:
                server.read_config(None, why)


def run_check_prometheus(args: argparse.Namespace) -> int:
    """Judge every SGLang server's history in Prometheus and print the advice; exit 2 on bad
    arguments, 1 when Prometheus cannot be read or holds no SGLang series for the selector.
    A history shorter than asked is judged on what there is, at a step that gives it enough
    samples, and said beside the answer."""
    try:
        since = args.since
        end = time_of(args.at, time.time())
        settings = history_settings(args, since)
    except (ValueError, ConfigError) as exc:
        print(f"error: {_first_error(exc)}", file=sys.stderr)
        return 2
    configure_logging("error")
    prom = settings.prometheus
    assert prom is not None
    progress = _Progress(f"reading {duration_text(since)} of history from {prom.url}")
    tuner, past = asyncio.run(_judged(progress, settings, end, since))
    spans = past.spans()
    had = max(spans.values(), default=since)
    if had < since and history_settings(args, had).scrape_interval_seconds < past.step:
        settings = history_settings(args, had)  # the samples there are, at a finer step
        tuner, past = asyncio.run(_judged(progress, settings, end, had))
        spans = past.spans()
    if progress.shown and sys.stderr.isatty():
        sys.stderr.write("\n")
    problem = _history_problem(tuner, past, settings)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    ev = tuner.state.latest()
    took = time.monotonic() - progress.started
    print(
        f"{len(ev.targets)} server(s) from {prom.url}: {past.steps} samples each, {past.step:g} s "
        f"apart, judged at {_utc(end)}; {past.queries} range queries ({past.seconds:.1f} s), "
        f"{took:.1f} s in all",
        file=sys.stderr,
    )
    history = {name: _history_said(spans.get(name, 0.0), since) for name in ev.targets}
    for line in _short_histories(history, since):
        print(line, file=sys.stderr)
    _print(ev, settings, args.format or "table", history, args.explain)
    return 0


async def _judged(
    progress: "_Progress", settings: Settings, end: float, since: float
) -> tuple[Tuner, History]:
    shown = asyncio.get_running_loop().create_task(progress.run())
    try:
        return await _judge_prometheus(settings, end, since)
    finally:
        shown.cancel()


def _history_said(span: float, since: float) -> str:
    """`5m of 1h` where a server's history is shorter than asked, else `1h`."""
    asked = duration_text(since)
    return asked if span >= since else f"{duration_text(span)} of {asked}"


def _short_histories(history: Mapping[str, str], since: float) -> list[str]:
    """One line per server judged on less history than asked (one for all when they agree)."""
    short = {name: said for name, said in history.items() if " of " in said}
    if not short:
        return []
    asked = duration_text(since)
    if len(set(short.values())) == 1 and len(short) == len(history):
        got = next(iter(short.values())).split(" of ")[0]
        return [f"judged on {got} of the {asked} asked: Prometheus holds no more for any server"]
    return [
        f"{name}: judged on {said.split(' of ')[0]} of the {asked} asked (no more in Prometheus)"
        for name, said in sorted(short.items())
    ]


def _history_problem(tuner: Tuner, past: History, settings: Settings) -> str | None:
    """Why there is nothing to judge: the first failed query, or no SGLang series at all."""
    prom = settings.prometheus
    assert prom is not None
    if past.error is not None:
        error = past.error.replace(": None: None", "")  # a JSON 404 that is not Prometheus's
        return f"cannot read the history from Prometheus: {error}{_query_hint(prom.url, error)}"
    if tuner.watch.servers:
        return None
    matchers = f"{{{prom.selector}}}" if prom.selector else "no selector"
    example = next(q.expr for q in tuner.fleet.source.queries) if tuner.fleet else ""
    return (
        f"{prom.url} holds no SGLang series (sglang:* or sglang_*, {matchers}) between "
        f"{_utc(past.start)} and {_utc(past.end)}: {past.queries} range queries, every "
        f"{past.step:g} s, e.g. {example}"
    )


def _query_hint(url: str, error: str) -> str:
    """What to do about a failed query, by what the answer says the URL is."""
    if "HTTP 401" in error or "HTTP 403" in error:
        return (
            "\n  Prometheus asks for credentials: give --username and --password-file, or "
            "--bearer-token-file (or SGLANG_TUNER_PROMETHEUS__BASIC_AUTH__USERNAME and "
            "SGLANG_TUNER_PROMETHEUS__BASIC_AUTH__PASSWORD_FILE, as the daemon takes them)"
        )
    if "HTTP 404" in error:
        parts = urlsplit(url)
        if parts.path.strip("/"):
            base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
            return f"\n  give Prometheus's base URL, without {parts.path}: --prometheus {base}"
        return (
            f"\n  no Prometheus query API at {url} (/api/v1/query_range answered 404); if it "
            f"is an SGLang server, watch it with: sglang-tuner check {url}"
        )
    if "unreachable" in error:
        return f"\n  is Prometheus listening at {url}? (its default port is 9090)"
    return ""


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


_FLAGS = {
    "prometheus.url": "--prometheus", "prometheus.selector": "--selector",
    "prometheus.basic_auth.username": "--username",
    "prometheus.basic_auth.password_file": "--password-file",
    "prometheus.basic_auth": "--username/--password-file",
    "prometheus.bearer_token_file": "--bearer-token-file", "prometheus.tls": "--ca-file",
    "prometheus": "--prometheus",
}  # fmt: skip


def _first_error(exc: Exception) -> str:
    """One line: a settings problem under the flag that gave it (`--selector: ...`)."""
    if not isinstance(exc, ConfigError):
        return str(exc)
    where, _, what = exc.problems[0].partition(": ")
    return f"{_FLAGS.get(where, where)}: {what.removeprefix('Value error, ')}"


# -- one line per server (table), one row per server and advice (csv) -----------------------------
def _action(action: ActionOut) -> str:
    """The change, its current value marked `(assumed)` where /server_info did not say it."""
    if action.current is not None and _assumed(action):
        return action.text.replace(f" {action.current} -> ", f" {action.current} (assumed) -> ", 1)
    return action.text


def _assumed(action: ActionOut) -> bool:
    return action.current is not None and "assumed" in action.note


def _per_server(report: AdviceList) -> dict[str, list[str]]:
    """Per target: severity, rule, what to do (its plan's next change, else its most severe
    advice, else why there is none)."""
    rows: dict[str, list[str]] = {}
    plans = {p.target: p for p in report.plans}
    for a in report.data:  # most severe first
        if a.target not in rows:
            rows[a.target] = [a.severity, a.rule, _action(a.action) or a.summary]
    for target, plan in plans.items():
        if plan.next is not None:
            step = plan.next
            rows[target] = [step.severity, step.rule, _action(step.action) or step.summary]
    no_data = dict(report.no_data_counts)
    for item in report.no_data:
        no_data[item.target] = no_data.get(item.target, 0) + 1
    for target, count in no_data.items():
        rows.setdefault(target, ["-", "-", f"no advice ({count} rule(s) without data)"])
    return rows


def advice_table(
    report: AdviceList, servers: Iterable[str] = (), history: Mapping[str, str] | None = None
) -> str:
    """One line per server: severity, rule and the change to make (or why there is none);
    with `history`, how much history each was judged on."""
    rows = _per_server(report)
    for name in servers:
        rows.setdefault(name, ["-", "-", "no advice: every rule with data passed"])
    if not rows:
        return "no server was judged\n"
    head = ["SERVER", *(["HISTORY"] if history else []), "SEVERITY", "RULE", "ADVICE"]
    table = [head]
    for name in sorted(rows):
        table.append([name, *([history.get(name, "-")] if history else []), *rows[name]])
    widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)] + [0]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in table]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def advice_csv(
    report: AdviceList, history: Mapping[str, str] | None = None, servers: Iterable[str] = ()
) -> str:
    """CSV: a row per advice (most severe first), and one per server without any; `current`
    comes with where it was read (`server_info`) or that it was `assumed`; with `history`, how
    much history each server was judged on."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    head = ["server", "rule", "severity", "state", "flag", "current", "suggested", "action"]
    writer.writerow([*head, "summary", "current_from", *(["history"] if history else [])])
    seen = set()

    def more(target: str) -> list[str]:
        return [history.get(target, "")] if history else []

    for a in report.data:
        seen.add(a.target)
        act = a.action
        source = "" if act.current is None else "assumed" if _assumed(act) else "server_info"
        writer.writerow([a.target, a.rule, a.severity, a.state, act.flag or "",
                         act.current or "", act.suggested or "", _action(act), a.summary,
                         source, *more(a.target)])  # fmt: skip
    rows = _per_server(report)
    for name in servers:
        rows.setdefault(name, ["-", "-", "no advice: every rule with data passed"])
    for target, row in sorted(rows.items()):
        if target not in seen:
            writer.writerow([target, "", "", "", "", "", "", "", row[2], "", *more(target)])
    return out.getvalue()
