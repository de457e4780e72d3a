"""Scrape one SGLang `/metrics` endpoint: total timeout, streamed size cap, closed failure set."""

import asyncio
import time
from collections.abc import Mapping

import httpx

from sglang_tuner.sources.sglang import NoSglangMetricsError, SignalMapper
from sglang_tuner.values import ScrapeResult, Snapshot

ACCEPT = "text/plain;version=0.0.4"  # never OpenMetrics: it may rewrite sglang: to sglang_ (§2)
DEFAULT_TIMEOUT_SECONDS = 3.0
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


class ScrapeError(Exception):
    """A target-side failure with its reason from `SCRAPE_FAILURE_REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


async def scrape_metrics(
    client: httpx.AsyncClient,
    name: str,
    url: str,
    mapper: SignalMapper,
    now: float,
    *,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    headers: Mapping[str, str] | None = None,
) -> ScrapeResult:
    """GET `<url>/metrics` and map it; target-side problems become a failed result, never raise."""
    metrics_url = url.rstrip("/") + "/metrics"
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_seconds):
            body = await fetch_body(client, metrics_url, max_body_bytes, headers, timeout_seconds)
        values = map_body(mapper, body, now, metrics_url)
    except ScrapeError as exc:
        return _failed(name, now, started, exc.reason, str(exc))
    except TimeoutError:
        message = f"GET {metrics_url} took longer than {timeout_seconds:g} s"
        return _failed(name, now, started, "timeout", message)
    snapshot = Snapshot(target=name, ts=now, values=values)
    return ScrapeResult(name, now, time.perf_counter() - started, snapshot=snapshot)


def _failed(name: str, now: float, started: float, reason: str, error: str) -> ScrapeResult:
    """A failed scrape result."""
    duration = time.perf_counter() - started
    return ScrapeResult(name, now, duration, error_reason=reason, error=error)


async def fetch_body(
    client: httpx.AsyncClient,
    url: str,
    max_body_bytes: int,
    headers: Mapping[str, str] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> bytes:
    """Stream a GET body, aborting past `max_body_bytes` (decoded); raises ScrapeError."""
    request_headers = {"Accept": ACCEPT, "Accept-Encoding": "gzip", **(headers or {})}
    try:
        async with client.stream(
            "GET", url, headers=request_headers, timeout=timeout_seconds
        ) as response:
            _check_status(response, url)
            _check_declared_length(response, url, max_body_bytes)
            return await _read_capped(response, url, max_body_bytes)
    except httpx.TimeoutException as exc:
        raise TimeoutError(str(exc)) from exc
    except httpx.ConnectError as exc:
        raise _connect_error(url, exc) from exc
    except httpx.HTTPError as exc:
        raise ScrapeError("connect_error", f"GET {url} failed: {_describe(exc)}") from exc


def _check_status(response: httpx.Response, url: str) -> None:
    """Map non-200 answers to reasons; 404 means SGLang runs without --enable-metrics."""
    code = response.status_code
    if code == 200:
        return
    if code == 404:
        hint = "SGLang serves /metrics only with --enable-metrics"
        raise ScrapeError("http_404_metrics_disabled", f"GET {url} returned 404: {hint}")
    reason = "http_5xx" if code >= 500 else "http_4xx"  # redirects are not followed: 4xx too
    raise ScrapeError(reason, f"GET {url} returned {code} {response.reason_phrase}")


def _check_declared_length(response: httpx.Response, url: str, max_body_bytes: int) -> None:
    """Refuse before reading when Content-Length already says the body is too large."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body_bytes:
        raise _too_large(url, max_body_bytes)


async def _read_capped(response: httpx.Response, url: str, max_body_bytes: int) -> bytes:
    """Read the (decompressed) body in chunks, stopping at the cap."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_body_bytes:
            raise _too_large(url, max_body_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(url: str, max_body_bytes: int) -> ScrapeError:
    """The body-size failure."""
    mib = max_body_bytes / (1024 * 1024)
    return ScrapeError("body_too_large", f"GET {url} returned more than {mib:g} MiB; aborted")


def _connect_error(url: str, exc: httpx.ConnectError) -> ScrapeError:
    """Connection refused gets its own reason; other connect failures are `connect_error`."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return ScrapeError("conn_refused", f"GET {url}: connection refused")
        cause = cause.__cause__ or cause.__context__
    return ScrapeError("connect_error", f"GET {url} could not connect: {_describe(exc)}")


def _describe(exc: BaseException) -> str:
    """A short one-line description of an exception."""
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def map_body(mapper: SignalMapper, body: bytes, now: float, url: str) -> dict[str, float]:
    """Decode and map a body; garbage -> `parse`, no SGLang samples -> `no_sglang_metrics`."""
    text = body.decode("utf-8", errors="replace")
    try:
        return mapper.update(text, now)
    except NoSglangMetricsError as exc:
        raise ScrapeError("no_sglang_metrics", f"GET {url} returned {exc}") from exc
    except ValueError as exc:
        raise ScrapeError("parse", f"GET {url} returned a body that is not metrics: {exc}") from exc
