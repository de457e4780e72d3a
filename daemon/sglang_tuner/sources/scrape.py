"""Scrape one SGLang `/metrics` endpoint: total timeout, decoded size cap, closed failure set."""

import time
from collections.abc import Mapping

from sglang_tuner.model.scrape import ScrapeLimits, ScrapeResult, Snapshot
from sglang_tuner.sources.exposition import LimitExceededError
from sglang_tuner.sources.http import BodyTooLargeError, ConnectFailedError, HttpClient, HttpError
from sglang_tuner.sources.sglang import NoSglangMetricsError, SignalMapper
from sglang_tuner.sources.timeout import timeout

ACCEPT = "text/plain;version=0.0.4"  # never OpenMetrics: it may rewrite sglang: to sglang_ (§2)
DEFAULT_TIMEOUT_SECONDS = 3.0
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
_HEADERS = {"Accept": ACCEPT, "Accept-Encoding": "gzip"}
NOT_FOUND = "http_404"
METRICS_DISABLED = "http_404_metrics_disabled"
# Endpoints every SGLang serves, metrics on or off (`/health` needs no API key). One of them
# answering 200 beside a 404 `/metrics` says the URL is SGLang's and it runs without
# --enable-metrics; none answering says the URL is wrong. Asked only after a 404, in this order.
SGLANG_PATHS: tuple[str, ...] = ("/health", "/server_info", "/get_server_info")
_PROBE_MAX_BYTES = 64 * 1024  # only the status is read; a longer body still gives it


class ScrapeError(Exception):
    """A target-side failure with its reason from `SCRAPE_FAILURE_REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


async def scrape_metrics(
    client: HttpClient,
    name: str,
    url: str,
    mapper: SignalMapper,
    now: float,
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    headers: Mapping[str, str] | None = None,
    limits: ScrapeLimits | None = None,
    token: str | None = None,
) -> ScrapeResult:
    """GET `<url>/metrics` and map it; target-side problems become a failed result, never raise.

    A 404 is told apart by asking `SGLANG_PATHS` (`token`: the server's API key for them).
    """
    metrics_url = url.rstrip("/") + "/metrics"
    started = time.perf_counter()
    try:
        async with timeout(timeout_seconds):
            body = await fetch_body(client, metrics_url, max_body_bytes, headers)
        values = map_body(mapper, body, now, metrics_url, limits)
    except ScrapeError as exc:
        if exc.reason == NOT_FOUND:
            left = timeout_seconds - (time.perf_counter() - started)
            exc = await diagnose_404(client, url, left, _probe_headers(headers, token))
        return _failed(name, now, started, exc.reason, str(exc))
    except TimeoutError:
        message = f"GET {metrics_url} took longer than {timeout_seconds:g} s"
        return _failed(name, now, started, "timeout", message)
    snapshot = Snapshot(target=name, ts=now, values=values)
    duration = time.perf_counter() - started
    return ScrapeResult(
        name, now, duration, snapshot, duplicate_samples=mapper.duplicates,
        resolution=mapper.resolution,
    )  # fmt: skip


def _failed(name: str, now: float, started: float, reason: str, error: str) -> ScrapeResult:
    """A failed scrape result."""
    duration = time.perf_counter() - started
    return ScrapeResult(name, now, duration, error_reason=reason, error=error)


async def fetch_body(
    client: HttpClient,
    url: str,
    max_body_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """GET a body, aborting past `max_body_bytes` (decoded); raises ScrapeError."""
    request_headers = {**_HEADERS, **headers} if headers else _HEADERS
    try:
        response = await client.get(url, request_headers, max_body_bytes=max_body_bytes)
    except BodyTooLargeError as exc:
        _check_status(exc.status, exc.reason, url)
        mib = max_body_bytes / (1024 * 1024)
        message = f"GET {url} returned more than {mib:g} MiB; aborted"
        raise ScrapeError("body_too_large", message) from None
    except ConnectFailedError as exc:
        if exc.refused:
            raise ScrapeError("conn_refused", f"GET {url}: connection refused") from exc
        raise ScrapeError(
            "connect_error", f"GET {url} could not connect: {_describe(exc)}"
        ) from exc
    except HttpError as exc:
        raise ScrapeError("connect_error", f"GET {url} failed: {_describe(exc)}") from exc
    _check_status(response.status, response.reason, url)
    return response.body


def _check_status(code: int, phrase: str, url: str) -> None:
    """Map non-200 answers to reasons (a 404 is `http_404` until `diagnose_404` tells more)."""
    if code == 200:
        return
    if code == 404:
        raise ScrapeError(NOT_FOUND, f"GET {url} returned 404")
    reason = "http_5xx" if code >= 500 else "http_4xx"  # redirects are not followed: 4xx too
    raise ScrapeError(reason, f"GET {url} returned {code} {phrase}")


def _probe_headers(headers: Mapping[str, str] | None, token: str | None) -> dict[str, str]:
    """The scrape's headers, with the server's API key when it has one."""
    probe = dict(headers or {})
    if token:
        probe["Authorization"] = f"Bearer {token}"
    return probe


async def diagnose_404(
    client: HttpClient, url: str, timeout_seconds: float, headers: Mapping[str, str]
) -> ScrapeError:
    """Why `<url>/metrics` answered 404: SGLang without --enable-metrics when one of
    `SGLANG_PATHS` answers 200 there (`http_404_metrics_disabled`), else a URL that leads to no
    SGLang server (`http_404`: a wrong path or port, or a proxy)."""
    base = url.rstrip("/")
    metrics_url = base + "/metrics"
    answers: list[str] = []
    path = SGLANG_PATHS[0]
    try:
        async with timeout(max(timeout_seconds, 0.0)):
            for path in SGLANG_PATHS:
                code = await _status(client, base + path, headers if path != "/health" else None)
                if code == 200:
                    hint = "SGLang serves /metrics only with --enable-metrics"
                    message = f"GET {metrics_url} returned 404 while {path} answers: {hint}"
                    return ScrapeError(METRICS_DISABLED, message)
                answers.append(f"{path} {code}")
    except TimeoutError:
        answers.append(f"{path} timed out")
    except HttpError as exc:
        answers.append(f"{path} failed: {_describe(exc)}")
    message = (
        f"GET {metrics_url} returned 404 and no SGLang endpoint answers there ("
        f"{', '.join(answers)}): a wrong URL? The target URL is the SGLang server's "
        "scheme://host:port"
    )
    return ScrapeError(NOT_FOUND, message)


async def _status(client: HttpClient, url: str, headers: Mapping[str, str] | None) -> int:
    """The status of a GET (the body is not read past `_PROBE_MAX_BYTES`); raises HttpError."""
    try:
        response = await client.get(url, headers, max_body_bytes=_PROBE_MAX_BYTES)
    except BodyTooLargeError as exc:
        return exc.status
    return response.status


def _describe(exc: BaseException) -> str:
    """A short one-line description of an exception."""
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def map_body(
    mapper: SignalMapper, body: bytes, now: float, url: str, limits: ScrapeLimits | None = None
) -> dict[str, float]:
    """Map a body (never decoded); garbage -> `parse`, no SGLang samples -> what the page was
    instead (`no_sglang_metrics`, `not_sglang`, `own_exporter`), past a limit -> its
    `*_limit_exceeded` reason."""
    try:
        return mapper.update(body, now, limits)
    except LimitExceededError as exc:
        raise ScrapeError(exc.reason, f"GET {url} returned {exc}") from None
    except NoSglangMetricsError as exc:
        raise ScrapeError(exc.reason, f"GET {url}: {exc}") from exc
    except ValueError as exc:
        raise ScrapeError("parse", f"GET {url} returned a body that is not metrics: {exc}") from exc
