"""Basic auth, extra headers and a rate limit in front of every API endpoint: a web config's
rules applied as exporter-toolkit applies them, by an ASGI middleware (`WebGuard`)."""

import asyncio
import base64
import binascii
import hashlib
import hmac
import os
import time
from collections import OrderedDict
from collections.abc import Collection, Mapping

import bcrypt
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sglang_tuner.web.config import WebConfig
from sglang_tuner.web.outflow import Outflow

# Good (user, password) pairs remembered, as many as exporter-toolkit remembers.
CACHE_SIZE = 100


class PasswordCheck:
    """bcrypt checks of `users`' passwords (50-250 ms each, so one at a time).

    A good pair is remembered as an HMAC of (user, hash, password) under a key made at start:
    no password is kept, and a Prometheus scraping every 15 s pays for one check, not one per
    scrape. An unknown user is checked against a configured hash all the same, so that a wrong
    user name takes as long as a wrong password.
    """

    def __init__(self, users: Mapping[str, bytes]) -> None:
        self._users = dict(users)
        self._decoy = next(iter(self._users.values()))
        self._key = os.urandom(32)
        self._good: OrderedDict[bytes, None] = OrderedDict()
        self._lock = asyncio.Lock()

    async def is_valid(self, user: str, password: bytes) -> bool:
        """The password is `user`'s."""
        hashed = self._users.get(user)
        digest = self._digest(user.encode(), hashed or b"", password)
        if hashed is not None and digest in self._good:
            return True
        async with self._lock:
            matches = await asyncio.to_thread(_checkpw, password, hashed or self._decoy)
        if not matches or hashed is None:
            return False
        self._good[digest] = None
        if len(self._good) > CACHE_SIZE:
            self._good.popitem(last=False)
        return True

    def _digest(self, *parts: bytes) -> bytes:
        message = b"".join(b"%d:%s" % (len(part), part) for part in parts)
        return hmac.new(self._key, message, hashlib.sha256).digest()


def _checkpw(password: bytes, hashed: bytes) -> bool:
    # Longer than bcrypt's 72 bytes: refused, as exporter-toolkit does (not cut short).
    return len(password) <= 72 and bcrypt.checkpw(password, hashed)


class RateLimiter:
    """A token bucket (Go's rate.Limiter, as exporter-toolkit uses it): `burst` requests at
    once, refilled at one per `interval_seconds`."""

    def __init__(self, interval_seconds: float, burst: int) -> None:
        self.interval_seconds, self.burst = interval_seconds, burst
        self.tokens = float(burst)
        self.at: float | None = None

    def allow(self, now: float) -> bool:
        """Take a token if there is one."""
        if self.at is not None:
            refill = max(0.0, now - self.at) / self.interval_seconds
            self.tokens = min(float(self.burst), self.tokens + refill)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class _Policy:
    """One web config's rules; replaced whole on a reload."""

    def __init__(self, web: WebConfig, open_paths: Collection[str]) -> None:
        self.headers = [(k.lower().encode(), v.encode()) for k, v in web.headers.items()]
        self.limiter = RateLimiter(*web.rate_limit) if web.rate_limit else None
        self.passwords = PasswordCheck(web.users) if web.users else None
        self.open_paths = frozenset(open_paths) | web.auth_excluded_paths


class WebGuard:
    """ASGI middleware before every endpoint: the web config's headers on every answer, its
    rate limit (429), then basic auth (401 with `WWW-Authenticate: Basic`); `open_paths`
    (probes) skip basic auth. Behind it, `Outflow` paces and bounds the answers."""

    def __init__(self, app: ASGIApp, web: WebConfig, open_paths: Collection[str] = ()) -> None:
        self.outflow = Outflow(app)  # answers paced to their readers, and never too many
        self.app: ASGIApp = self.outflow
        self.update(web, open_paths)

    def update(self, web: WebConfig, open_paths: Collection[str]) -> None:
        """Apply a reloaded web config to the next request (one reference replaced)."""
        self._policy = _Policy(web, open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self._policy
        if policy.headers:
            send = _with_headers(send, policy.headers)
        if policy.limiter is not None and not policy.limiter.allow(time.monotonic()):
            await _answer(send, 429, b"Too Many Requests\n")
            return
        if policy.passwords is not None and scope["path"] not in policy.open_paths:
            given = _credentials(scope)
            if given is None or not await policy.passwords.is_valid(*given):
                await _answer(send, 401, b"Unauthorized\n", (b"www-authenticate", b"Basic"))
                return
        await self.app(scope, receive, send)


def _credentials(scope: Scope) -> tuple[str, bytes] | None:
    """(user, password) from `Authorization: Basic ...`; None without or when malformed."""
    value = dict(scope["headers"]).get(b"authorization", b"")
    scheme, _, token = value.partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        user, colon, password = base64.b64decode(token, validate=True).partition(b":")
    except binascii.Error:
        return None
    return (user.decode(errors="replace"), password) if colon else None


def _with_headers(send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *headers]}
        await send(message)

    return sending


async def _answer(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    fixed = [(b"content-type", b"text/plain; charset=utf-8")]
    fixed.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": fixed + [*headers]})
    await send({"type": "http.response.body", "body": body})
