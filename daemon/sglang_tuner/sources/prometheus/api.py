"""A client for the Prometheus HTTP query API (`/api/v1/query`, `/api/v1/query_range`), as
Prometheus, Thanos, Mimir and VictoriaMetrics serve it. Failures are returned, never raised.

The answers are a peer's: each is read up to `max_answer_bytes` (one 200 MiB label once took
`check --prometheus` to 8.9 GB), each call has one overall deadline however slowly the bytes
come, and while the API has not answered a call for a whole deadline the next calls fail at
once with the same reason (so `check --prometheus` fails within its timeout instead of waiting
out every query of its history in turn).
"""

import math
import time
import zlib
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from sglang_tuner.config.credentials import auth_headers, ssl_context
from sglang_tuner.config.settings import PrometheusSettings
from sglang_tuner.model.secrets import redact_peer_text, redact_userinfo
from sglang_tuner.sources.prometheus.promql import duration
from sglang_tuner.sources.timeout import timeout as time_limit

# A range query may take its per-query timeout per step, up to Prometheus's own default limit
# for any query (2 minutes), never longer; before the API has answered anything, one timeout.
RANGE_DEADLINE_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class Answer:
    """One query's answer: the result list as the API gives it, or why there is none."""

    result: list[dict[str, Any]]
    duration_seconds: float
    warnings: tuple[str, ...] = ()
    error_reason: str | None = None  # one of model.scrape.QUERY_FAILURE_REASONS
    error: str | None = None


class QueryFailed(Exception):
    """A failed query with its reason from `QUERY_FAILURE_REASONS`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PrometheusClient:
    """One connection pool to the query API, with the configured auth, tenant and TLS."""

    def __init__(self, settings: PrometheusSettings) -> None:
        """Reads the credential files now: an unreadable one raises OSError at start."""
        headers = auth_headers(settings.basic_auth, settings.bearer_token_file, "prometheus")
        if settings.tenant:
            headers["X-Scope-OrgID"] = settings.tenant
        headers["Accept-Encoding"] = "gzip"  # read raw and inflated here, within the cap
        verify = ssl_context(settings.tls) if settings.url.startswith("https:") else True
        limits = httpx.Limits(max_connections=settings.max_concurrent_queries)
        self.url = redact_userinfo(settings.url)
        self.timeout_seconds = settings.timeout_seconds
        self.max_answer_bytes = settings.max_answer_bytes
        self._silent: tuple[float, str] | None = None  # until when, and why: no answer
        self._heard_at = -math.inf  # when an answer (any) last came from the API
        self._client = httpx.AsyncClient(  # httpx's own 5 s default would cut queries short
            base_url=settings.url, headers=headers, verify=verify, limits=limits,
            timeout=settings.timeout_seconds,
        )  # fmt: skip

    async def query(self, expr: str, ts: float) -> Answer:
        """An instant query evaluated at `ts` (an instant vector is expected)."""
        params = {"query": expr, "time": f"{ts:.3f}"}
        return await self._ask("/api/v1/query", params, "vector")

    async def query_range(self, expr: str, start: float, end: float, step: float) -> Answer:
        """A range query from `start` to `end` every `step` seconds (a matrix is expected); it
        may take as long as an instant query per step."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        steps = int((end - start) // step) + 1
        return await self._ask("/api/v1/query_range", params, "matrix", steps)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def _ask(
        self, path: str, params: dict[str, str], result_type: str, steps: int = 1
    ) -> Answer:
        started = time.perf_counter()
        timeout = self._deadline(steps)
        # Prometheus stops evaluating at its own `timeout` too, instead of working on for nobody.
        params["timeout"] = duration(timeout)
        try:
            self._check_heard()
            async with time_limit(timeout):
                status, reason, content = await self._post(path, params, timeout)
            self._silent, self._heard_at = None, time.monotonic()
            body = _parse(status, reason, content)
            result, warnings = _result(body, result_type)
        except QueryFailed as exc:
            return Answer([], time.perf_counter() - started, (), exc.reason, str(exc))
        except (TimeoutError, httpx.TimeoutException):
            message = f"no answer from {self.url} within {timeout:g} s"
            if self._heard_at < time.monotonic() - timeout:  # nothing answered meanwhile
                self._silent = (time.monotonic() + timeout, message)
            return Answer([], time.perf_counter() - started, (), "timeout", message)
        except httpx.HTTPError as exc:
            message = f"{self.url} unreachable: {_first_line(exc)}"
            return Answer([], time.perf_counter() - started, (), "unreachable", message)
        return Answer(result, time.perf_counter() - started, warnings)

    def _deadline(self, steps: int) -> float:
        """The per-query timeout; a range query's per step, at most RANGE_DEADLINE_SECONDS, once
        the API has answered at all (until then a call that waits longer waits for nothing)."""
        if self._heard_at == -math.inf:
            return self.timeout_seconds
        return min(self.timeout_seconds * steps, max(self.timeout_seconds, RANGE_DEADLINE_SECONDS))

    def _check_heard(self) -> None:
        """Fail at once after a call that waited a whole deadline while the API answered
        nothing at all, for one more deadline."""
        if self._silent is not None and time.monotonic() < self._silent[0]:
            raise QueryFailed("timeout", self._silent[1] + " (the previous query's; not sent)")

    async def _post(
        self, path: str, params: dict[str, str], timeout: float
    ) -> tuple[int, str, bytes]:
        """Status, reason and body of one POST, the body read up to `max_answer_bytes`."""
        request = self._client.build_request("POST", path, data=params, timeout=timeout)
        response = await self._client.send(request, stream=True)
        try:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_answer_bytes:
                raise QueryFailed("too_large", self._too_large(int(declared)))
            chunks, size = [], 0
            async for chunk in response.aiter_raw():
                size += len(chunk)
                if size > self.max_answer_bytes:
                    raise QueryFailed("too_large", self._too_large(size, at_least=True))
                chunks.append(chunk)
        finally:
            await response.aclose()
        return (
            response.status_code,
            response.reason_phrase,
            _decoded(response, b"".join(chunks), self.max_answer_bytes),
        )

    def _too_large(self, size: int, at_least: bool = False) -> str:
        over = "over " if at_least else ""
        limit = self.max_answer_bytes
        return f"an answer of {over}{size:,} bytes from {self.url} (max_answer_bytes {limit:,})"


def _decoded(response: httpx.Response, raw: bytes, limit: int) -> bytes:
    """The body without its Content-Encoding (gzip answers are asked for by httpx)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding != "gzip":
        raise QueryFailed("bad_response", f"an answer in an unknown encoding {encoding[:40]!r}")
    return _gunzip(raw, limit)


def _gunzip(raw: bytes, limit: int) -> bytes:
    """A gzip body, never inflated past `limit` bytes (a zip bomb stops there)."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise QueryFailed("bad_response", f"a broken gzip answer: {exc}") from None
    if len(out) > limit:
        raise QueryFailed("too_large", f"a gzip answer inflating past {limit:,} bytes")
    return out


def _parse(code: int, phrase: str, content: bytes) -> dict[str, Any]:
    """The JSON body; an error answer becomes QueryFailed with its reason."""
    try:
        body = orjson.loads(content)
    except ValueError:  # orjson.JSONDecodeError included
        body = None
    if code == 200 and isinstance(body, dict):
        return body
    detail = f"{body.get('errorType')}: {body.get('error')}" if isinstance(body, dict) else ""
    detail = redact_peer_text(detail or f"{code} {phrase}")  # it may echo what we sent
    if isinstance(body, dict) and body.get("errorType") in ("timeout", "canceled"):
        raise QueryFailed("timeout", f"query timed out: {detail}"[:300])
    if code >= 500:
        raise QueryFailed("server_error", f"HTTP {code}: {detail}"[:300])
    if code >= 300:
        raise QueryFailed("rejected", f"HTTP {code}: {detail}"[:300])
    raise QueryFailed("bad_response", f"not a Prometheus API answer (HTTP {code})")


def _result(body: dict[str, Any], result_type: str) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The result list and warnings of a successful answer of the expected type."""
    data = body.get("data")
    if body.get("status") != "success" or not isinstance(data, dict):
        raise QueryFailed("bad_response", f"status {body.get('status')!r}: {body.get('error')}")
    if data.get("resultType") != result_type or not isinstance(data.get("result"), list):
        got = data.get("resultType")
        raise QueryFailed("bad_response", f"expected a {result_type}, got a {got}")
    warnings = tuple(str(w)[:300] for w in body.get("warnings") or ())
    return data["result"], warnings


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__
