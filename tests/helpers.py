"""Test helpers: windows from compact series notation, and rule inputs around them; servers
that misbehave, and what a daemon process shows of them, for the fault tests.

Series notation: space-separated values; `VxN` repeats V N times; `_` is a missing sample
(`_x5` five of them). `window_from(step_seconds=15, token_usage="0.8x20", num_queue_reqs="5x20")`.
"""

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from sglang_tuner.changes.record import Change
from sglang_tuner.judge import TargetJudgement
from sglang_tuner.model.advice import Outcome
from sglang_tuner.model.flags import FlagHistory
from sglang_tuner.model.next_change import Plan
from sglang_tuner.model.scrape import Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.service_levels import NO_LEVELS, AppliedLevels
from sglang_tuner.model.window import Window, WindowView
from sglang_tuner.rule import Rule, RuleInput, apply_rule
from sglang_tuner.target_state import TargetState

_DEFAULT_CONFIG = ServerConfig()


# A daemon that judges within seconds: scrapes and evaluations every 0.5 s, a 10 s window, advice
# raised and cleared at once (no hold_for, no keep_firing_for).
FAST_DAEMON: dict[str, float] = {
    "scrape_interval_seconds": 0.5,
    "scrape_timeout_seconds": 0.4,
    "evaluation_interval_seconds": 0.5,
    "window_seconds": 10.0,
    "min_samples": 6,
    "hold_for_seconds": 0.0,
    "keep_firing_for_seconds": 0.0,
}


def parse_series(text: str | Sequence[float | None]) -> list[float | None]:
    """'0.5x3 _ 1' -> [0.5, 0.5, 0.5, None, 1.0]; a list passes through."""
    if not isinstance(text, str):
        return list(text)
    out: list[float | None] = []
    for token in text.split():
        value, _, count = token.partition("x")
        out.extend([None if value == "_" else float(value)] * (int(count) if count else 1))
    return out


def window_from(
    step_seconds: float = 5.0, start: float = 0.0, **series: str | Sequence[float | None]
) -> WindowView:
    """A WindowView holding the series as snapshots `step_seconds` apart, through `Window`."""
    columns = {name: parse_series(text) for name, text in series.items()}
    lengths = {len(values) for values in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"series lengths differ: { {k: len(v) for k, v in columns.items()} }")
    count = lengths.pop() if lengths else 0
    window = Window(count + 2)
    for k in range(count):
        values = {name: v[k] for name, v in columns.items() if v[k] is not None}
        window.append(Snapshot("t", start + k * step_seconds, values))  # type: ignore[arg-type]
    now = start + max(0, count - 1) * step_seconds
    return window.view(now, max(1, count) * step_seconds)


def rule_input(
    rule: Rule,
    view: WindowView,
    config: ServerConfig | None = _DEFAULT_CONFIG,
    profile: str = "offline",
    thresholds: Mapping[str, float] | None = None,
    legacy: bool = False,
    frequently_ratio: float = 0.5,
    min_samples: int = 6,
    interval_seconds: float = 5.0,
    now: float | None = None,
    config_error: str | None = None,
    error_reason: str | None = None,
    changes: tuple[Change, ...] = (),
    history: FlagHistory | None = None,
    service_levels: AppliedLevels = NO_LEVELS,
) -> RuleInput:
    """A RuleInput with the rule's own thresholds for the profile unless given."""
    return RuleInput(
        view=view,
        config=config,
        profile=profile,
        thresholds=thresholds
        if thresholds is not None
        else rule.thresholds_for(profile, legacy=legacy),
        frequently_ratio=frequently_ratio,
        min_samples=min_samples,
        interval_seconds=interval_seconds,
        now=now if now is not None else (view.ts[-1] if view.ts else 0.0),
        config_error=config_error,
        error_reason=error_reason,
        changes=changes,
        history=history or FlagHistory(),
        service_levels=service_levels,
    )


def evaluate(rule: Rule, view: WindowView, **kwargs: object) -> Outcome:
    """The rule's outcome (its preamble, then its check) for `rule_input(rule, view, **kwargs)`."""
    return apply_rule(rule, rule_input(rule, view, **kwargs))  # type: ignore[arg-type]


# -- fault runs ------------------------------------------------------------------------------

Route = Callable[["HostileHandler", str], Iterable[bytes] | bytes | None]


class HostileHandler(BaseHTTPRequestHandler):
    """Answers `/<kind>/<endpoint>` with `server.routes[kind](self, endpoint)`: the bytes of a
    200 body (sent with its length), chunks to stream (the connection closes after them), or
    None when the route answered itself."""

    protocol_version = "HTTP/1.1"
    server: "_HostileHTTPServer"

    def log_message(self, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        """Dispatch on the first path segment; unknown kinds and endpoints answer 404."""
        kind, _, endpoint = self.path.strip("/").partition("/")
        route = self.server.routes.get(kind)
        answer = route(self, endpoint) if route is not None else b""
        if route is None or (isinstance(answer, bytes) and not answer):
            self.send_bytes(b"Not Found", status=404)
        elif isinstance(answer, bytes):
            self.send_bytes(answer)
        elif answer is not None:
            self.stream(kind, answer)

    def send_bytes(self, body: bytes, status: int = 200, **headers: str) -> None:
        """One response with a Content-Length."""
        self.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the client hung up (its cap or its timeout)

    def stream(self, kind: str, chunks: Iterable[bytes]) -> None:
        """A close-delimited body, chunk by chunk, until the client hangs up; records how much
        of it left (`server.sent[kind]`: the most of any one response)."""
        self.send_response(200)
        self.end_headers()
        self.close_connection = True
        sent = 0
        try:
            for chunk in chunks:
                self.wfile.write(chunk)
                self.wfile.flush()
                sent += len(chunk)
        except OSError:
            pass  # the client hung up (its cap or its timeout)
        self.server.sent[kind] = max(self.server.sent[kind], sent)


class _HostileHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes: Mapping[str, Route]) -> None:
        super().__init__(("127.0.0.1", 0), HostileHandler)
        self.routes = routes
        self.sent: Counter[str] = Counter()  # the most body bytes one streamed response sent


class HostileServer:
    """`_HostileHTTPServer` on a thread, as a context manager; `url(kind)` is a target's URL."""

    def __init__(self, routes: Mapping[str, Route]) -> None:
        self.http = _HostileHTTPServer(routes)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> "HostileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.http.shutdown()
        self.http.server_close()

    def url(self, kind: str) -> str:
        """The base URL of the target that misbehaves as `kind`."""
        return f"http://127.0.0.1:{self.http.server_port}/{kind}"

    @property
    def sent(self) -> Counter[str]:
        """Per kind, the most body bytes one streamed response sent before the client hung up."""
        return self.http.sent


def socket_buffer_bytes() -> int:
    """The most a loopback connection can hold in flight: the kernel's largest TCP receive
    buffer plus its largest send buffer (`/proc/sys/net/ipv4/tcp_[rw]mem`, 32 + 4 MiB on some
    kernels). A client that stops reading still lets the sender write that much more."""
    total = 0
    for name in ("tcp_rmem", "tcp_wmem"):
        try:
            total += int(Path(f"/proc/sys/net/ipv4/{name}").read_text().split()[2])
        except (OSError, IndexError, ValueError):
            total += 8 * 1024 * 1024
    return total


def vm_mib(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of a process from /proc/PID/status (VmRSS, VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def successful_scrapes(target: Mapping[str, Any]) -> int:
    """Scrapes of a `/targets` entry that produced a snapshot."""
    return int(target["scrapes_total"]) - sum(target["scrape_failures"].values())


def scrape_success_ratio(
    get_target: Callable[[], Mapping[str, Any]], seconds: float, interval_seconds: float
) -> float:
    """Successful scrapes of a target over `seconds`, as a share of the scrapes its interval
    asks for (one scrape of slack for where the two reads fall in the interval)."""
    before, started = successful_scrapes(get_target()), time.monotonic()
    time.sleep(seconds)
    after, elapsed = successful_scrapes(get_target()), time.monotonic() - started
    return (after - before + 1) / (elapsed / interval_seconds)


@dataclass
class Reviewed:
    """A watched server as publishing reads it (`publish.Reviewed`), put together by hand."""

    state: TargetState
    judgement: TargetJudgement | None = None
    plan: Plan | None = None


def reviewed(
    targets: Mapping[str, TargetState],
    judged: Mapping[str, TargetJudgement] | None = None,
    plans: Mapping[str, Plan] | None = None,
) -> dict[str, Reviewed]:
    """Servers as publishing reads them, from their states, judgements and plans by name."""
    judged, plans = judged or {}, plans or {}
    return {n: Reviewed(t, judged.get(n), plans.get(n)) for n, t in targets.items()}
