"""A small asyncio HTTP/1.1 server: one listening port per simulated SGLang server."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable, Mapping
from typing import Any

from .exposition import render_metrics
from .model import ServerModel
from .server_info import info_paths, model_info, server_info

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JSON_TYPE = "application/json"
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}
COUNTED = frozenset(
    {
        "/metrics",
        "/health",
        "/health_generate",
        "/server_info",
        "/get_server_info",
        "/model_info",
        "/get_model_info",
    }
)
MAX_BODY = 1 << 16
SIM_PREFIX = "/_sim/"


class Response:
    """Status, content type and body of one answer."""

    __slots__ = ("status", "ctype", "body")

    def __init__(self, status: int, body: bytes = b"", ctype: str = JSON_TYPE) -> None:
        self.status, self.body, self.ctype = status, body, ctype


def json_response(status: int, payload: Any) -> Response:
    """A JSON answer."""
    return Response(status, json.dumps(payload).encode())


class SimServer:
    """Serves one ServerModel; the model advances to `clock()` before each answer."""

    def __init__(
        self,
        model: ServerModel,
        clock: Callable[[], float],
        api_key: str | None,
        scenario: str,
        control: Callable[[SimServer, str, Mapping[str, Any]], dict[str, Any]],
    ) -> None:
        self.model, self.clock, self.api_key = model, clock, api_key
        self.scenario, self.control = scenario, control
        self.port = 0
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: str, port: int) -> None:
        """Bind and listen."""
        self.server = await asyncio.start_server(self._connection, host, port, backlog=1024)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        if self.server is not None:
            self.server.close()
            for writer in list(self.writers):
                writer.close()
            await self.server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # the event loop is closing with a client still connected: nothing to answer
        finally:
            self.writers.discard(writer)
            writer.close()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = (lines[0].split(" ") + ["", ""])[:3]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = min(int(headers.get("content-length", "0") or 0), MAX_BODY)
        body = await reader.readexactly(length) if length else b""
        self.model.advance_to(self.clock())
        path = target.split("?")[0]
        if self.model.status() == "dead" and not path.startswith(SIM_PREFIX):
            return False  # the process is gone: drop the connection, as a refused one would be
        response = self.handle(method, path, headers, body)
        keep = headers.get("connection", "").lower() != "close"
        writer.write(self._encode(response, headers, keep))
        await writer.drain()
        return keep

    def _encode(self, response: Response, headers: dict[str, str], keep: bool) -> bytes:
        body, extra = response.body, ""
        if body and "gzip" in headers.get("accept-encoding", ""):
            body = gzip.compress(body, compresslevel=1)
            extra = "Content-Encoding: gzip\r\n"
        reason = REASONS.get(response.status, "OK")
        head = (
            f"HTTP/1.1 {response.status} {reason}\r\nContent-Type: {response.ctype}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}"
            f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
        )
        return head.encode() + body

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Response:
        """Route one request; counts it like SGLang's HTTP metrics middleware."""
        response = self._route(method, path.rstrip("/") or "/", headers, body)
        if path in COUNTED:
            self.model.http.inc("http_requests", 1, (path, method))
            self.model.http.inc("http_responses", 1, (path, str(response.status), method))
        return response

    def _route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Response:
        if path.startswith(SIM_PREFIX):
            return self._sim_control(method, path.removeprefix(SIM_PREFIX), body)
        if self.model.status() != "up":
            return json_response(503, {"detail": "server is starting"})
        if path in ("/health", "/health_generate"):
            return Response(200)
        if path == "/metrics":
            if not self.model.metrics_enabled:
                return json_response(404, {"detail": "Not Found"})
            return Response(200, render_metrics(self.model).encode(), METRICS_TYPE)
        info, models = info_paths(self.model.version)
        if path in info or path in models:
            if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
                return json_response(401, {"error": "Unauthorized"})
            if path in info:
                return json_response(200, server_info(self.model, self.port, self.api_key))
            return json_response(200, model_info(self.model))
        return json_response(404, {"detail": "Not Found"})

    def _sim_control(self, method: str, action: str, body: bytes) -> Response:
        """Simulator-only control: POST /_sim/scenario, /_sim/restart, /_sim/load."""
        if method != "POST":
            return json_response(405, {"detail": "Method Not Allowed"})
        try:
            payload = json.loads(body or b"{}")
        except ValueError:
            return json_response(400, {"detail": "body must be a JSON object"})
        if not isinstance(payload, dict):
            return json_response(400, {"detail": "body must be a JSON object"})
        try:
            return json_response(200, self.control(self, action, payload))
        except ValueError as exc:
            return json_response(400, {"detail": str(exc)})
