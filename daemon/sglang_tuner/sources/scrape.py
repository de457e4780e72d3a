"""Scrape one SGLang `/metrics` endpoint: total timeout, decoded size cap, closed failure set."""

import asyncio
import time
from collections.abc import Mapping

from sglang_tuner.model.scrape import ScrapeLimits, ScrapeResult, Snapshot
from sglang_tuner.sources.exposition import LimitExceededError
from sglang_tuner.sources.http import BodyTooLargeError, ConnectFailedError, HttpClient, HttpError
from sglang_tuner.sources.sglang import NoSglangMetricsError, SignalMapper

ACCEPT = "text/plain;version=0.0.4"  # never OpenMetrics: it may rewrite sglang: to sglang_ (§2)
DEFAULT_TIMEOUT_SECONDS = 3.0
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
_HEADERS = {"Accept": ACCEPT, "Accept-Encoding": "gzip"}


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
) -> ScrapeResult:
    """GET `<url>/metrics` and map it; target-side problems become a failed result, never raise."""
    metrics_url = url.rstrip("/") + "/metrics"
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_seconds):
            body = await fetch_body(client, metrics_url, max_body_bytes, headers)
        values = map_body(mapper, body, now, metrics_url, limits)
    except ScrapeError as exc:
        return _failed(name, now, started, exc.reason, str(exc))
    except TimeoutError:
        message = f"GET {metrics_url} took longer than {timeout_seconds:g} s"
        return _failed(name, now, started, "timeout", message)
    snapshot = Snapshot(target=name, ts=now, values=values)
    duration = time.perf_counter() - started
    return ScrapeResult(name, now, duration, snapshot, duplicate_samples=mapper.duplicates)


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
    """Map non-200 answers to reasons; 404 means SGLang runs without --enable-metrics."""
    if code == 200:
        return
    if code == 404:
        hint = "SGLang serves /metrics only with --enable-metrics"
        raise ScrapeError("http_404_metrics_disabled", f"GET {url} returned 404: {hint}")
    reason = "http_5xx" if code >= 500 else "http_4xx"  # redirects are not followed: 4xx too
    raise ScrapeError(reason, f"GET {url} returned {code} {phrase}")


def _describe(exc: BaseException) -> str:
    """A short one-line description of an exception."""
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def map_body(
    mapper: SignalMapper, body: bytes, now: float, url: str, limits: ScrapeLimits | None = None
) -> dict[str, float]:
    """Map a body (never decoded); garbage -> `parse`, no SGLang samples -> `no_sglang_metrics`,
    past a limit -> its `*_limit_exceeded` reason."""
    try:
        return mapper.update(body, now, limits)
    except LimitExceededError as exc:
        raise ScrapeError(exc.reason, f"GET {url} returned {exc}") from None
    except NoSglangMetricsError as exc:
        raise ScrapeError("no_sglang_metrics", f"GET {url} returned {exc}") from exc
    except ValueError as exc:
        raise ScrapeError("parse", f"GET {url} returned a body that is not metrics: {exc}") from exc
