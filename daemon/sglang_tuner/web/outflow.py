"""Answers sent at the pace their readers read them, and never too many at once.

ASGI middleware before every endpoint. A larger body goes out in CHUNK_BYTES pieces, so the
server's flow control (it waits while a connection's write buffer is past its high-water mark)
bounds what each connection holds to about one piece: a 30 MB `/metrics` answer written whole
to a client that never reads stayed in memory, and 300 such clients took the daemon to 5.2 GB.
A reader that takes nothing for SEND_TIMEOUT_SECONDS loses its connection. At most MAX_ANSWERS
answers are in progress at once; past that a request gets `503` with `Retry-After` at once
(the probes, `/healthz` and `/readyz`, always get theirs).
"""

import asyncio
import logging
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1024 * 1024
MAX_ANSWERS = 64
SEND_TIMEOUT_SECONDS = 30.0
ALWAYS_ANSWERED = frozenset(("/healthz", "/readyz"))


class ReaderTooSlow(Exception):
    """A client took nothing of its answer for SEND_TIMEOUT_SECONDS."""


class Outflow:
    """Paced, bounded answers (see the module's docstring); `refused` counts the 503s and
    `cut` the connections dropped for not reading."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.in_progress = 0
        self.refused = 0
        self.cut = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.in_progress >= MAX_ANSWERS and scope["path"] not in ALWAYS_ANSWERED:
            self.refused += 1
            await _busy(send)
            return
        self.in_progress += 1
        try:
            await self.app(scope, receive, _paced(send))
        except Exception as exc:
            if not _too_slow(exc):
                raise
            self.cut += 1  # the server closes the connection: the answer was never completed
            logger.info("dropped a client that read nothing of %s for %.0f s", scope["path"],
                        SEND_TIMEOUT_SECONDS)  # fmt: skip
        finally:
            self.in_progress -= 1


def _paced(send: Send) -> Send:
    """`send`, a larger body split into CHUNK_BYTES pieces, each sent within
    SEND_TIMEOUT_SECONDS."""

    async def sending(message: Message) -> None:
        body = message.get("body", b"") if message["type"] == "http.response.body" else b""
        if len(body) <= CHUNK_BYTES:  # fits the connection's buffer: no wait worth a deadline
            await send(message)
            return
        more = message.get("more_body", False)
        view = memoryview(body)
        for start in range(0, len(body), CHUNK_BYTES):
            last = start + CHUNK_BYTES >= len(body)
            piece = bytes(view[start : start + CHUNK_BYTES])
            await _within(send({**message, "body": piece, "more_body": more or not last}))

    return sending


async def _within(sent: Awaitable[None]) -> None:
    try:
        await asyncio.wait_for(sent, SEND_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        raise ReaderTooSlow from None


def _too_slow(exc: BaseException) -> bool:
    """`exc` is ReaderTooSlow, or a group of exceptions holding one (Starlette's task groups)."""
    if isinstance(exc, ReaderTooSlow):
        return True
    inner = getattr(exc, "exceptions", None) or ()
    return any(_too_slow(e) for e in inner)


async def _busy(send: Send) -> None:
    body = b"Too many answers in progress; retry shortly\n"
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode()), (b"retry-after", b"1")]  # fmt: skip
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
