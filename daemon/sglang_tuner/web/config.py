"""The API's web config file: TLS and basic auth in Prometheus exporter-toolkit's format.

Read as exporter-toolkit reads it (unknown keys are errors, relative paths are relative to the
file, `basic_auth_users` holds bcrypt hashes), then checked as far as serving needs: the
certificate and key are loaded into the `SSLContext` the API will serve with. Problems name the
file and never quote a hash, a key or the line they are on.
"""

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from sglang_tuner.web.tls import TLSConfigError, TLSServerConfig, server_context

# The response headers exporter-toolkit lets a web config set, with their allowed values.
_HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}
_BCRYPT = re.compile(r"^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$")
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class WebConfigError(Exception):
    """A web config file that cannot be served with; the message names the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _HTTPServerConfig(_Strict):
    http2: bool = True  # accepted; the API speaks HTTP/1.1
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def headers_are_allowed(cls, value: dict[str, str]) -> dict[str, str]:
        """Only the headers (and values) exporter-toolkit allows."""
        for name, text in value.items():
            if name not in _HEADERS:
                raise ValueError(f"HTTP header {name!r} can not be configured")
            if _HEADERS[name] and text not in _HEADERS[name]:
                raise ValueError(f"{name} must be one of {', '.join(_HEADERS[name])}")
        return value


class _RateLimit(_Strict):
    burst: int = Field(0, ge=0)
    interval: float = 0.0

    @field_validator("interval", mode="before")
    @classmethod
    def interval_is_a_go_duration(cls, value: object) -> float:
        """A Go duration ("1s", "1m30s", "500ms") as seconds."""
        if isinstance(value, int) and not isinstance(value, bool):
            return value * 1e-9  # a bare integer is nanoseconds in Go
        if value == "0":
            return 0.0
        if not isinstance(value, str) or not re.fullmatch(f"(?:{_GO_DURATION.pattern})+", value):
            raise ValueError('must be a duration like "1s", "500ms" or "1m30s"')
        return sum(float(n) * _UNITS[unit] for n, unit in _GO_DURATION.findall(value))


class _File(_Strict):
    tls_server_config: TLSServerConfig = Field(default_factory=TLSServerConfig)
    http_server_config: _HTTPServerConfig = Field(default_factory=_HTTPServerConfig)
    rate_limit: _RateLimit = Field(default_factory=_RateLimit)
    basic_auth_users: dict[str, SecretStr] = Field(default_factory=dict)
    # exporter-toolkit 0.14's key: paths answered without basic auth (exact paths)
    auth_excluded_paths: list[str] = Field(default_factory=list)

    @field_validator("auth_excluded_paths")
    @classmethod
    def paths_are_absolute(cls, value: list[str]) -> list[str]:
        """Each entry is a path as requested: it starts with '/'."""
        bad = [p for p in value if not p.startswith("/")]
        if bad:
            raise ValueError(f"paths must start with '/': {', '.join(map(repr, bad))}")
        return value

    @field_validator("basic_auth_users")
    @classmethod
    def passwords_are_bcrypt_hashes(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        """Each password is a bcrypt hash (cost 4-31); the bad ones named by user only."""
        bad = [user for user, h in value.items() if not _BCRYPT.match(h.get_secret_value())]
        if bad:
            raise ValueError(f"not a bcrypt hash for user(s) {', '.join(map(repr, bad))}")
        return value


@dataclass(frozen=True)
class WebConfig:
    """What the API serves with: TLS (None: plain HTTP), users, headers and a rate limit."""

    path: Path | None = None
    tls: TLSServerConfig | None = None
    context: ssl.SSLContext | None = field(default=None, repr=False)
    users: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict)
    rate_limit: tuple[float, int] | None = None  # (seconds per request, burst)
    auth_excluded_paths: frozenset[str] = frozenset()  # answered without basic auth


def load_web_config(path: Path | None) -> WebConfig:
    """The web config at `path` (None: no TLS, no auth), checked; WebConfigError if bad."""
    if path is None:
        return WebConfig()
    parsed = _parse(path, _read(path))
    tls = _resolved(parsed.tls_server_config, path.parent)
    context = None
    if tls.is_enabled:
        try:
            context = server_context(tls)
        except TLSConfigError as exc:
            raise WebConfigError(f"web config file {path}: {exc}") from None
    limit = parsed.rate_limit
    if limit.interval and limit.burst < 1:
        raise WebConfigError(f"web config file {path}: rate_limit.burst: must be at least 1")
    users = {u: h.get_secret_value().encode() for u, h in parsed.basic_auth_users.items()}
    return WebConfig(
        path=path,
        tls=tls if context is not None else None,
        context=context,
        users=users,
        headers=parsed.http_server_config.headers,
        rate_limit=(limit.interval, limit.burst) if limit.interval else None,
        auth_excluded_paths=frozenset(parsed.auth_excluded_paths),
    )


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise WebConfigError(f"web config file {path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise WebConfigError(f"web config file {path}: not a text file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)  # never the line itself: it may hold a hash
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise WebConfigError(f"web config file {path}: not valid YAML{where}: {problem}") from None


def _parse(path: Path, data: Any) -> _File:
    if data is None:
        return _File()  # an empty file: no TLS, no auth (as exporter-toolkit reads it)
    if not isinstance(data, dict):
        raise WebConfigError(f"web config file {path}: must be a mapping")
    try:
        return _File.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(e["loc"], e["type"], e["msg"]) for e in exc.errors())
        raise WebConfigError(f"web config file {path}: {problems}") from None


def _problem(loc: tuple[int | str, ...], kind: str, message: str) -> str:
    where = ".".join(map(str, loc)) or "(top level)"
    if kind == "extra_forbidden":
        return f"{where}: unknown key"
    return f"{where}: {message.removeprefix('Value error, ')}"


def _resolved(tls: TLSServerConfig, folder: Path) -> TLSServerConfig:
    """Relative file paths taken from the web config's folder (exporter-toolkit's JoinDir)."""
    names = ("cert_file", "key_file", "client_ca_file")
    changes = {n: str(folder / getattr(tls, n)) for n in names if getattr(tls, n)}
    return tls.model_copy(update=changes)
