"""A client for the Prometheus HTTP query API (`/api/v1/query`, `/api/v1/query_range`), as
Prometheus, Thanos, Mimir and VictoriaMetrics serve it. Failures are returned, never raised."""

import time
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from sglang_tuner.config.credentials import auth_headers, ssl_context
from sglang_tuner.config.settings import PrometheusSettings
from sglang_tuner.model.secrets import redact_userinfo
from sglang_tuner.sources.prometheus.promql import duration
from sglang_tuner.sources.timeout import timeout as time_limit


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
        verify = ssl_context(settings.tls) if settings.url.startswith("https:") else True
        limits = httpx.Limits(max_connections=settings.max_concurrent_queries)
        self.url = redact_userinfo(settings.url)
        self.timeout_seconds = settings.timeout_seconds
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
        timeout = self.timeout_seconds * steps
        # Prometheus stops evaluating at its own `timeout` too, instead of working on for nobody.
        params["timeout"] = duration(timeout)
        try:
            async with time_limit(timeout):
                response = await self._client.post(path, data=params, timeout=timeout)
            body = _parse(response)
            result, warnings = _result(body, result_type)
        except QueryFailed as exc:
            return Answer([], time.perf_counter() - started, (), exc.reason, str(exc))
        except (TimeoutError, httpx.TimeoutException):
            message = f"no answer from {self.url} within {timeout:g} s"
            return Answer([], time.perf_counter() - started, (), "timeout", message)
        except httpx.HTTPError as exc:
            message = f"{self.url} unreachable: {_first_line(exc)}"
            return Answer([], time.perf_counter() - started, (), "unreachable", message)
        return Answer(result, time.perf_counter() - started, warnings)


def _parse(response: httpx.Response) -> dict[str, Any]:
    """The JSON body; an error answer becomes QueryFailed with its reason."""
    try:
        body = orjson.loads(response.content)
    except ValueError:  # orjson.JSONDecodeError included
        body = None
    code = response.status_code
    if code == 200 and isinstance(body, dict):
        return body
    detail = f"{body.get('errorType')}: {body.get('error')}" if isinstance(body, dict) else ""
    detail = detail or f"{code} {response.reason_phrase}"
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
