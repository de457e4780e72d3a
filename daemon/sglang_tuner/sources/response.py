"""One HTTP/1.1 connection as an asyncio protocol that frames and decodes a response as it arrives.

Framing: Content-Length, chunked, or until the server closes. Decoding: gzip and deflate,
counted against the cap as they are decompressed, so a small gzip body cannot inflate past it.
"""

import asyncio
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

_inflate: ModuleType
try:  # zlib-ng inflates a scraped page in a sixth of zlib's time (docs/performance.md)
    from zlib_ng import zlib_ng as _inflate
except ImportError:  # no wheel for this platform: the same API, slower
    _inflate = zlib

_MAX_HEAD_BYTES = 64 * 1024
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class HttpError(Exception):
    """A request that got no usable response."""


class ProtocolFailedError(HttpError):
    """The connection broke or the server did not speak HTTP/1.x."""


class BodyTooLargeError(HttpError):
    """The (decoded) body would exceed the cap; the response head said `status` `reason`."""

    def __init__(self, message: str, status: int, reason: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


class StaleConnectionError(HttpError):
    """A kept-alive connection closed before any byte of the response: safe to retry a GET."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A complete response: status, reason, headers (lower-case names) and the decoded body."""

    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes


class ResponseReader(asyncio.Protocol):
    """A connection that answers one request at a time (`send`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, registry: set["ResponseReader"]) -> None:
        self._loop, self._registry = loop, registry
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[HttpResponse] | None = None
        self._keep_alive = False
        self.last_used = time.monotonic()
        self._cap = 0
        self._head = b""
        self._seen_bytes = False
        self._status, self._reason = 0, ""
        self._headers: dict[str, str] = {}
        self._chunked, self._received = False, 0
        self._length: int | None = None
        self._pending = b""  # chunked framing bytes not yet complete
        self._decoder: zlib._Decompress | None = None  # zlib's or zlib-ng's, one API
        self._chunks: list[bytes] = []
        self._size = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._registry.add(self)

    def is_reusable(self) -> bool:
        """Idle, kept alive by both sides, and not closed by the server."""
        transport = self._transport
        return self._keep_alive and transport is not None and not transport.is_closing()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._keep_alive = False
        if self._transport is not None:
            self._transport.close()

    def send(self, request: bytes, max_body_bytes: int) -> "asyncio.Future[HttpResponse]":
        """Write `request`; the future gets the response (or an HttpError)."""
        assert self._transport is not None
        self._waiter = self._loop.create_future()
        self._cap, self._head, self._status = max_body_bytes, b"", 0
        self._keep_alive = self._seen_bytes = False
        self._transport.write(request)
        return self._waiter

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self.close()  # nothing asked for this
            return
        self._seen_bytes = True
        try:
            if self._status == 0:
                data = self._read_head(data)
            if self._status and data:
                self._read_body(data)
        except HttpError as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        waiting = self._waiter is not None and not self._waiter.done()
        if waiting and self._status and self._length is None and not self._chunked:
            try:
                self._finish()  # a close-delimited body ends here
            except HttpError as exc:
                self._fail(exc)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        self._keep_alive = False
        if self._waiter is not None and not self._waiter.done():
            if not self._seen_bytes:
                self._waiter.set_exception(StaleConnectionError("closed before answering"))
            else:
                reason = str(exc) if exc else "closed before the response ended"
                self._waiter.set_exception(ProtocolFailedError(reason))
        self._waiter = None

    def _fail(self, exc: HttpError) -> None:
        assert self._waiter is not None
        self._waiter.set_exception(exc)
        self.close()

    def _read_head(self, data: bytes) -> bytes:
        """Consume the status line and headers; return what follows them."""
        head = self._head + data
        end = head.find(b"\r\n\r\n")
        if end < 0:
            if len(head) > _MAX_HEAD_BYTES:
                raise ProtocolFailedError("response head too long")
            self._head = head
            return b""
        lines = head[:end].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ProtocolFailedError(f"not an HTTP/1.x response: {lines[0][:40]!r}")
        if code.startswith("1"):  # 100 Continue and friends: the real answer follows
            self._head = b""
            return self._read_head(head[end + 4 :])
        self._start(int(code), reason, version, _headers(lines[1:]))
        return head[end + 4 :]

    def _start(self, status: int, reason: str, version: str, headers: dict[str, str]) -> None:
        """Decide framing, keep-alive and decoding from the head."""
        self._status, self._reason, self._headers = status, reason, headers
        connection = headers.get("connection", "").lower()
        self._keep_alive = "close" not in connection and (
            version != "HTTP/1.0" or "keep-alive" in connection
        )
        self._chunks, self._size = [], 0
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        declared = headers.get("content-length", "")
        self._length = int(declared) if declared.isdigit() and not self._chunked else None
        if status in (204, 304):
            self._length = 0
        if self._length is not None and self._length > self._cap:
            raise self._too_large(f"Content-Length {self._length} is over the cap")
        self._pending = b""
        wbits = _DECODERS.get(headers.get("content-encoding", "").strip().lower())
        self._decoder = None if wbits is None else _inflate.decompressobj(wbits)
        self._received = 0
        if not self._chunked and self._length is None:
            self._keep_alive = False
        if self._length == 0:
            self._finish()

    def _read_body(self, data: bytes) -> None:
        if self._chunked:
            self._read_chunked(data)
            return
        if self._length is not None:
            room = self._length - self._received
            if len(data) > room:
                self._keep_alive = False  # more than the response: do not trust this connection
                data = data[:room]
            self._received += len(data)
        self._add(data)
        if self._length is not None and self._received >= self._length:
            self._finish()

    def _read_chunked(self, data: bytes) -> None:
        """Strip chunked framing (`size\\r\\n data\\r\\n ... 0\\r\\n\\r\\n`)."""
        buffer, pos = self._pending + data, 0
        while True:
            line_end = buffer.find(b"\r\n", pos)
            if line_end < 0:
                break
            size_text = buffer[pos:line_end].split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolFailedError("bad chunk size") from None
            if size == 0:
                self._finish()  # trailers, if any, are not read: the connection is not reused
                self._keep_alive = self._keep_alive and buffer.endswith(b"\r\n\r\n")
                return
            if len(buffer) < line_end + 2 + size + 2:
                break
            self._add(buffer[line_end + 2 : line_end + 2 + size])
            pos = line_end + 2 + size + 2
        self._pending = buffer[pos:]

    def _add(self, data: bytes, *, decoded: bool = False) -> None:
        """Decode and keep body bytes, counting the decoded size against the cap."""
        if self._decoder is not None and not decoded:
            try:
                data = self._decoder.decompress(data, self._cap - self._size + 1)
            except (zlib.error, _inflate.error) as exc:
                raise ProtocolFailedError(f"bad compressed body: {exc}") from None
        self._size += len(data)
        if self._size > self._cap:
            raise self._too_large("body over the cap")
        self._chunks.append(data)

    def _too_large(self, message: str) -> BodyTooLargeError:
        return BodyTooLargeError(message, self._status, self._reason)

    def _finish(self) -> None:
        """Complete the waiter with the whole body."""
        if self._decoder is not None:
            self._add(self._decoder.flush(), decoded=True)
        assert self._waiter is not None
        body = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks = []
        self.last_used = time.monotonic()
        self._waiter.set_result(HttpResponse(self._status, self._reason, self._headers, body))
        self._waiter = None


def _headers(lines: list[str]) -> dict[str, str]:
    """Header lines as a dict of lower-case names; repeated headers are joined with ", "."""
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        key, value = name.strip().lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers
