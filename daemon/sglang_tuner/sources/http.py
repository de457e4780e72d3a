"""The scrape path's HTTP client: keep-alive GETs, gzip, a decompressed-size cap, no redirects.

A GET is one write and usually one read: the response is framed and decoded in
`data_received` (`response.py`), with no task, stream or per-request object besides a future.
Connections are kept per origin, so a client costs the same per request whatever the number
of targets; one client per target keeps a removed target's sockets easy to close. Total
timeouts are the caller's (`asyncio.timeout`): a cancelled request closes its connection.
"""

import asyncio
import base64
import ssl
import time
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from sglang_tuner import __version__
from sglang_tuner.model.target_spec import TargetTLS
from sglang_tuner.sources.response import (
    BodyTooLargeError,
    HttpError,
    HttpResponse,
    ProtocolFailedError,
    ResponseReader,
    StaleConnectionError,
)

USER_AGENT = f"sglang-tuner/{__version__}"
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

__all__ = [
    "BodyTooLargeError",
    "ConnectFailedError",
    "HttpClient",
    "HttpError",
    "HttpResponse",
    "ProtocolFailedError",
]


class ConnectFailedError(HttpError):
    """No connection: refused (`refused`), unresolvable, unreachable or a failed TLS handshake."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


class _Origin:
    """Where a URL's requests go, and the prefix of their request head."""

    __slots__ = ("key", "host", "port", "tls", "head", "auth")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectFailedError(f"not an http(s) URL: {url[:80]}", refused=False)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        self.key = (parts.scheme, self.host, self.port)
        self.auth = ""
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self.auth = "Authorization: Basic " + base64.b64encode(pair.encode()).decode() + "\r\n"
        path = parts.path or "/"
        target = f"{path}?{parts.query}" if parts.query else path
        if any(c in target for c in " \r\n"):
            raise ConnectFailedError(f"not a valid request target: {target[:80]!r}", refused=False)
        self.head = f"GET {target} HTTP/1.1\r\nHost: {host}\r\n"


def client_context(tls: TargetTLS) -> ssl.SSLContext:
    """A client SSLContext for Prometheus' `tls_config`: the CA (else the system's store), a
    client certificate, or no verification at all; raises OSError (ssl.SSLError) on bad files."""
    context = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
    if tls.cert_file is not None:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file) if tls.key_file else None)
    if tls.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class HttpClient:
    """GETs over a few kept-alive connections per origin (scheme, host, port).

    `tls`: the target's own `tls_config`, loaded at the first https connection (a file that does
    not load fails that connection, as any TLS failure does, and is tried again at the next)."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext | None = None,
        *,
        tls: TargetTLS | None = None,
        max_idle_per_origin: int = 2,
        idle_seconds: float = 60.0,
        user_agent: str = USER_AGENT,
    ) -> None:
        self._ssl = None if tls is not None else ssl_context
        self._tls = tls
        self._max_idle = max_idle_per_origin
        self._idle_seconds = idle_seconds
        self._agent = f"User-Agent: {user_agent}\r\n"
        self._origins: dict[str, _Origin] = {}  # URL -> origin (a target's few URLs repeat)
        self._idle: dict[tuple[str, str, int], list[ResponseReader]] = {}
        self._open: set[ResponseReader] = set()

    async def __aenter__(self) -> "HttpClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def get(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> HttpResponse:
        """GET `url`; the body is decoded (gzip, deflate) and at most `max_body_bytes` long.

        Raises ConnectFailedError, BodyTooLargeError or ProtocolFailedError (all HttpError).
        """
        origin = self._origins.get(url)
        if origin is None:
            origin = self._origins[url] = _Origin(url)
        request = self._request(origin, headers)
        reused = True
        while True:
            conn = self._checkout(origin)
            if conn is None:
                conn, reused = await self._connect(origin), False
            try:
                response = await conn.send(request, max_body_bytes)
            except StaleConnectionError:
                if not reused:
                    raise ProtocolFailedError("closed without answering") from None
                continue  # a kept-alive connection the server had just closed: try a new one
            except BaseException:
                conn.close()
                raise
            self._checkin(origin, conn)
            return response

    def _request(self, origin: _Origin, headers: Mapping[str, str] | None) -> bytes:
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items()) if headers else ""
        if extra.count("\n") != len(headers or ()) or extra.count("\r") != len(headers or ()):
            raise ProtocolFailedError("a request header holds a line break")  # never echo it
        return f"{origin.head}{self._agent}{origin.auth}{extra}\r\n".encode("latin-1")

    def _checkout(self, origin: _Origin) -> ResponseReader | None:
        """The most recently used live idle connection, closing expired ones."""
        idle = self._idle.get(origin.key)
        oldest = time.monotonic() - self._idle_seconds
        while idle:
            conn = idle.pop()
            if conn.is_reusable() and conn.last_used >= oldest:
                return conn
            conn.close()
        return None

    def _checkin(self, origin: _Origin, conn: ResponseReader) -> None:
        idle = self._idle.setdefault(origin.key, [])
        if conn.is_reusable() and len(idle) < self._max_idle:
            idle.append(conn)
        else:
            conn.close()

    async def _connect(self, origin: _Origin) -> ResponseReader:
        loop = asyncio.get_running_loop()
        context, name = None, None
        try:
            if origin.tls:
                context = self._ssl = self._ssl or self._new_context()
                name = self._tls.server_name if self._tls and self._tls.server_name else origin.host
            _, conn = await loop.create_connection(
                lambda: ResponseReader(loop, self._open), origin.host, origin.port,
                ssl=context, server_hostname=name,
            )  # fmt: skip
        except OSError as exc:  # also socket.gaierror and ssl.SSLError
            text = str(exc) or type(exc).__name__
            refused = isinstance(exc, ConnectionRefusedError) or "refused" in text.lower()
            raise ConnectFailedError(text, refused=refused) from exc
        return conn

    def _new_context(self) -> ssl.SSLContext:
        if self._tls is None:
            return ssl.create_default_context()
        try:
            return client_context(self._tls)
        except OSError as exc:  # a missing file, a PEM that does not load
            raise ConnectFailedError(f"tls_config does not load: {exc}", refused=False) from exc

    async def aclose(self) -> None:
        """Close every connection, idle or not."""
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
