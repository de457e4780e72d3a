"""Settings of the servers to watch: one target (its URL, profile, labels, key, log, limits) and
the file_sd files that list more. Part of `settings.py`'s schema; also this replica's shard."""

import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator

from sglang_tuner.config.cross_checks import CrossChecked
from sglang_tuner.config.duration import Duration
from sglang_tuner.config.services import TLSSettings
from sglang_tuner.model.secrets import redact_url_secrets, redact_userinfo
from sglang_tuner.model.server_config import PROFILES, Profile
from sglang_tuner.model.service_levels import ServiceLevels

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Prometheus's scrape limits: global settings, and per target (None there: the global value).
LIMIT_FIELDS = ("sample_limit", "label_limit", "label_value_length_limit")
SAMPLE_LIMIT_HELP = "Fail a scrape whose page holds more samples (0: no limit; SGLang writes ~800)"
LABEL_LIMIT_HELP = "Fail a scrape where a series read has more labels than this (0: no limit)"
VALUE_LIMIT_HELP = "Fail a scrape where a series read has a longer label value, bytes (0: no limit)"


def checked_url(value: str) -> str:
    """An http(s) URL with a host and a valid port; the trailing slash dropped."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    try:
        parts.port  # noqa: B018 (raises for a port outside 0-65535)
    except ValueError as exc:
        raise ValueError(f"bad port in {redact_url_secrets(value)!r}: {exc}") from None
    try:  # what the resolver does with it: an empty label or one over 63 characters fails
        parts.hostname.encode("idna")
    except UnicodeError:
        raise ValueError(
            f"{parts.hostname[:80]!r} is not a host name: a label (between dots) is empty or "
            "longer than 63 characters"
        ) from None
    return value.rstrip("/")


class _Strict(CrossChecked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetTLSSettings(TLSSettings):
    """Prometheus' `tls_config` for one target: its /metrics and /server_info requests (with
    `source: gateway`, the gateway's /engine_metrics and its workers' /server_info)."""

    server_name: str | None = Field(
        None, description="Name the server's certificate must carry (and SNI), not the URL's host"
    )

    @model_validator(mode="after")
    def cert_with_key(self) -> "TargetTLSSettings":
        """A client certificate needs its key, and a key its certificate."""
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together (a client certificate)")
        return self


class ServiceLevelSettings(_Strict):
    """Service levels: what the server promises its users (unset: the profile's default)."""

    ttft_p99_seconds: Duration | None = Field(
        None, gt=0, description="Time to first token, p99, at most (e.g. 2s)"
    )
    itl_p50_seconds: Duration | None = Field(
        None, gt=0, description="Inter-token latency, p50, at most (e.g. 30ms)"
    )
    itl_p99_seconds: Duration | None = Field(
        None, gt=0, description="Inter-token latency, p99, at most (e.g. 200ms)"
    )
    min_tokens_per_s: float | None = Field(
        None, ge=0, description="Generated tokens per second, at least (0: no floor)"
    )

    @model_validator(mode="after")
    def p50_within_p99(self) -> "ServiceLevelSettings":
        """ITL p50's level is at most ITL p99's: a median above the tail cannot be met."""
        p50, p99 = self.itl_p50_seconds, self.itl_p99_seconds
        if p50 is not None and p99 is not None and p50 > p99:
            raise ValueError(
                f"itl_p50_seconds ({p50 * 1000:g} ms) is above itl_p99_seconds "
                f"({p99 * 1000:g} ms): a median cannot exceed the 99th percentile"
            )
        return self

    def levels(self) -> ServiceLevels:
        """The model's value of these settings."""
        return ServiceLevels(**self.model_dump())


class ProfileLevelSettings(_Strict):
    """Each workload profile's service levels, over the built-in ones (docs/configuration.md)."""

    offline: ServiceLevelSettings | None = None
    online: ServiceLevelSettings | None = None
    long_context: ServiceLevelSettings | None = None
    multi_turn: ServiceLevelSettings | None = None

    def by_profile(self) -> dict[str, ServiceLevels]:
        """The model's values, per profile given."""
        return {p: s.levels() for p in PROFILES if (s := getattr(self, p)) is not None}


class TargetSettings(_Strict):
    """One SGLang server to watch."""

    url: str = Field(description="Base URL of the SGLang server, e.g. http://127.0.0.1:30000")
    name: str | None = Field(None, description="Label value `target`; defaults to host:port")
    profile: Profile | None = Field(
        None,
        description=f"Workload profile: {', '.join(PROFILES)}; unset: inferred from the traffic "
        "(a standing queue: offline; requests served as they arrive: online)",
    )
    service_levels: ServiceLevelSettings | None = Field(
        None,
        description="This server's service levels (ttft_p99_seconds, itl_p50_seconds, "
        "itl_p99_seconds, min_tokens_per_s); each one unset: its profile's",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels for alerts")
    api_key_file: Path | None = Field(None, description="File holding the server's --api-key")
    api_key_env: str | None = Field(None, description="Environment variable holding --api-key")
    log_file: Path | None = Field(
        None, description='SGLang log file to follow (optional); "-" reads the standard input'
    )
    log_command: list[str] | None = Field(
        None,
        description="A command whose output is the SGLang log, followed and restarted with "
        "back-off, e.g. [journalctl, -u, sglang, -f, -o, cat] (optional; not with log_file)",
    )
    dcgm_url: str | None = Field(None, description="DCGM exporter base URL for this GPU node")
    gpu_model: str | None = Field(None, description="GPU model, e.g. 'NVIDIA H100 80GB HBM3'")
    guide_version: Literal["current", "legacy"] = Field(
        "current", description="Thresholds of the current guide, or the older one (queue 50-1000)"
    )
    sample_limit: int | None = Field(None, ge=0, description=SAMPLE_LIMIT_HELP)
    label_limit: int | None = Field(None, ge=0, description=LABEL_LIMIT_HELP)
    label_value_length_limit: int | None = Field(None, ge=0, description=VALUE_LIMIT_HELP)
    tls: TargetTLSSettings | None = Field(
        None,
        description="TLS of an https URL: ca_file, cert_file, key_file, server_name, "
        "insecure_skip_verify (Prometheus' tls_config); unset: the system's trust store",
    )
    source: Literal["server", "gateway"] = Field(
        "server",
        description="server: the URL is one SGLang server; gateway: an SGLang Model Gateway, "
        "whose /engine_metrics page gives one target per worker, named <name>/<worker URL>",
    )

    @field_validator("url")
    @classmethod
    def url_is_the_servers_base_url(cls, value: str) -> str:
        """An http(s) base URL; the trailing slash is dropped, a `/metrics` path refused."""
        url = checked_url(value)
        if urlsplit(url).path.endswith("/metrics"):
            base = redact_userinfo(url).removesuffix("/metrics")
            raise ValueError(f"give the server's base URL ({base}), not its /metrics")
        return url

    @field_validator("dcgm_url")
    @classmethod
    def dcgm_url_is_http(cls, value: str | None) -> str | None:
        """An http(s) URL when given."""
        return None if value is None else checked_url(value)

    @field_validator("labels")
    @classmethod
    def label_names_are_prometheus_names(cls, value: dict[str, str]) -> dict[str, str]:
        """Label names Alertmanager and Prometheus accept ([a-zA-Z_][a-zA-Z0-9_]*, no __)."""
        bad = [k for k in value if not _LABEL_NAME.match(k) or k.startswith("__")]
        if bad:
            raise ValueError(f"not a valid label name: {', '.join(map(repr, bad))}")
        return value

    @model_validator(mode="after")
    def one_log_source(self) -> "TargetSettings":
        """A log comes from a file or a command, not both; a command names a program."""
        if self.log_file is not None and self.log_command is not None:
            raise ValueError("give log_file or log_command, not both")
        if self.log_command is not None and not (self.log_command and self.log_command[0]):
            raise ValueError("log_command: name the program to run, e.g. [journalctl, ...]")
        return self

    @property
    def target_name(self) -> str:
        """The `target` label value: `name`, else host:port (never a password or a query secret
        of the URL)."""
        return self.name or re.sub(r"^https?://", "", redact_url_secrets(self.url))


class FileSDSettings(_Strict):
    """Prometheus file_sd files (JSON or YAML) listing targets; re-read when they change."""

    files: list[str] = Field(description="Paths or globs of file_sd files")
    refresh_interval_seconds: Duration = Field(30.0, gt=0, description="How often to check them")
    profile: Profile | None = Field(
        None, description="Profile for targets found in these files (unset: inferred)"
    )


class ShardSettings(_Strict):
    """This replica's share of the targets: those whose name hashes to `index` mod `count`."""

    index: int = Field(0, ge=0, description="This replica's shard, 0 .. count-1")
    count: int = Field(1, ge=1, description="Replicas sharing the targets")

    @model_validator(mode="after")
    def index_below_count(self) -> "ShardSettings":
        """A shard index names one of the `count` shards."""
        if self.index >= self.count:
            raise ValueError(f"index {self.index} must be below count {self.count}")
        return self
