"""Settings: one YAML file, then SGLANG_TUNER_* environment variables, then command-line flags.

Every problem is reported at once with its YAML path (`targets[1].url: ...`); the CLI exits 2.
"""

import re
from collections.abc import Collection, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .config_fleet import (
    BasicAuthSettings,
    Profile,
    PrometheusSettings,
    ShardSettings,
    TLSSettings,
)
from .values import PROFILES, ScrapeLimits, read_key_file, redact_userinfo

__all__ = ["BasicAuthSettings", "PrometheusSettings", "ShardSettings", "TLSSettings"]
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]+$")


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Prometheus's scrape limits: global settings, and per target (None there: the global value).
LIMIT_FIELDS = ("sample_limit", "label_limit", "label_value_length_limit")
_LIMITS = ScrapeLimits()
_SAMPLE_LIMIT = "Fail a scrape whose page holds more samples (0: no limit; SGLang writes ~800)"
_LABEL_LIMIT = "Fail a scrape where a series read has more labels than this (0: no limit)"
_VALUE_LIMIT = "Fail a scrape where a series read has a longer label value, bytes (0: no limit)"


def checked_url(value: str) -> str:
    """An http(s) URL with a host and a valid port; the trailing slash dropped."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    try:
        parts.port  # noqa: B018 (raises for a port outside 0-65535)
    except ValueError as exc:
        raise ValueError(f"bad port in {redact_userinfo(value)!r}: {exc}") from None
    return value.rstrip("/")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSettings(_Strict):
    """One SGLang server to watch."""

    url: str = Field(description="Base URL of the SGLang server, e.g. http://127.0.0.1:30000")
    name: str | None = Field(None, description="Label value `target`; defaults to host:port")
    profile: Profile = Field("offline", description=f"Workload profile: {', '.join(PROFILES)}")
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels for alerts")
    api_key_file: Path | None = Field(None, description="File holding the server's --api-key")
    api_key_env: str | None = Field(None, description="Environment variable holding --api-key")
    log_file: Path | None = Field(None, description="SGLang log file to follow (optional)")
    dcgm_url: str | None = Field(None, description="DCGM exporter base URL for this GPU node")
    gpu_model: str | None = Field(None, description="GPU model, e.g. 'NVIDIA H100 80GB HBM3'")
    guide_version: Literal["current", "legacy"] = Field(
        "current", description="Thresholds of the current guide, or the older one (queue 50-1000)"
    )
    sample_limit: int | None = Field(None, ge=0, description=_SAMPLE_LIMIT)
    label_limit: int | None = Field(None, ge=0, description=_LABEL_LIMIT)
    label_value_length_limit: int | None = Field(None, ge=0, description=_VALUE_LIMIT)

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

    @field_validator("api_key_file")
    @classmethod
    def api_key_file_is_one_line(cls, value: Path | None) -> Path | None:
        """Readable, one line (checked now, so check-config catches what start would fail on)."""
        if value is not None:
            read_key_file(value)
        return value

    @property
    def target_name(self) -> str:
        """The `target` label value: `name`, else host:port (never a password in the URL)."""
        return self.name or re.sub(r"^https?://", "", redact_userinfo(self.url))


class FileSDSettings(_Strict):
    """Prometheus file_sd files (JSON or YAML) listing targets; re-read when they change."""

    files: list[str] = Field(description="Paths or globs of file_sd files")
    refresh_interval_seconds: float = Field(30.0, gt=0, description="How often to check them")
    profile: Profile = Field("offline", description="Profile for targets found in these files")


class RuleSettings(_Strict):
    """Per-rule overrides, keyed by rule id in `rules:`."""

    enabled: bool = True
    frequently_ratio: float | None = Field(None, gt=0, le=1)
    window_seconds: float | None = Field(None, gt=0)
    hold_for_seconds: float | None = Field(None, ge=0)
    keep_firing_for_seconds: float | None = Field(None, ge=0)
    severity: Literal["info", "warning", "critical"] | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)


class AlertmanagerSettings(_Strict):
    """Where and how to push alerts (Alertmanager API v2)."""

    urls: list[str] = Field(
        default_factory=list, description="Alertmanager base URLs (all get every alert)"
    )
    resend_delay_seconds: float = Field(60.0, gt=0, description="Re-send firing alerts this often")
    timeout_seconds: float = Field(10.0, gt=0, description="Per-request timeout")
    queue_capacity: int = Field(10000, gt=0, description="Pending alerts kept while AM is down")
    basic_auth: BasicAuthSettings | None = None
    bearer_token_file: Path | None = None
    tls: TLSSettings = Field(default_factory=TLSSettings)

    @field_validator("urls")
    @classmethod
    def urls_are_http(cls, value: list[str]) -> list[str]:
        """Every URL is http(s) with a valid port."""
        return [checked_url(url) for url in value]


class Settings(BaseSettings):
    """All daemon settings. Durations are float seconds."""

    model_config = SettingsConfigDict(
        env_prefix="SGLANG_TUNER_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    targets: list[TargetSettings] = Field(default_factory=list, description="SGLang servers")
    file_sd: list[FileSDSettings] = Field(default_factory=list, description="file_sd sources")
    scrape_interval_seconds: float = Field(5.0, gt=0, description="Scrape every target this often")
    scrape_timeout_seconds: float = Field(3.0, gt=0, description="Give up on a scrape after this")
    max_body_bytes: int = Field(16 * 1024 * 1024, gt=0, description="Largest /metrics body read")
    sample_limit: int = Field(_LIMITS.sample_limit, ge=0, description=_SAMPLE_LIMIT)
    label_limit: int = Field(_LIMITS.label_limit, ge=0, description=_LABEL_LIMIT)
    label_value_length_limit: int = Field(
        _LIMITS.label_value_length_limit, ge=0, description=_VALUE_LIMIT
    )
    server_info_interval_seconds: float = Field(300.0, gt=0, description="Re-read /server_info")
    unreachable_retry_seconds: float = Field(
        60.0,
        ge=0,
        description="A target refusing connections (or unresolvable) this long is tried this "
        "often instead of every scrape interval (0: every interval, as Prometheus does)",
    )
    evaluation_interval_seconds: float = Field(
        15.0, gt=0, description="Judge each target's rules this often (right after a scrape)"
    )
    window_seconds: float = Field(300.0, gt=0, description="Default rule window")
    frequently_ratio: float = Field(0.5, gt=0, le=1, description='"Frequently" = share of samples')
    min_samples: int = Field(6, ge=1, description="Samples a window needs before rules judge it")
    hold_for_seconds: float = Field(120.0, ge=0, description="Pending this long before firing")
    verify_warmup_seconds: float = Field(
        60.0,
        ge=0,
        description="After a restart with new flags, skip at least this long "
        "(longer when requests take longer: two service times) before comparing",
    )
    verify_window_seconds: float = Field(
        600.0,
        gt=0,
        description="Length of the windows compared before and after a change "
        "(ten minutes: a verdict on a 5 % effect needs that much of a noisy server)",
    )
    keep_firing_for_seconds: float = Field(300.0, ge=0, description="Keep firing after it clears")
    listen_host: str = Field("0.0.0.0", description="API and /metrics address")
    listen_port: int = Field(9877, ge=0, le=65535, description="API and /metrics port")
    web_config_file: Path | None = Field(
        None, description="TLS and basic auth for the API: a web config file (exporter-toolkit's)"
    )
    web_auth_exempt_paths: list[Literal["/healthz", "/readyz"]] = Field(
        default_factory=list, description="Paths answered without basic auth, for probes"
    )
    external_url: str | None = Field(None, description="Our URL as others reach it (alert links)")
    database: Path = Field(Path("sglang-tuner.db"), description="SQLite file for history")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    rules: dict[str, RuleSettings] = Field(default_factory=dict, description="Per-rule overrides")
    alertmanager: AlertmanagerSettings = Field(default_factory=AlertmanagerSettings)
    prometheus: PrometheusSettings | None = Field(
        None, description="Read the fleet from a Prometheus-compatible API (beside targets)"
    )
    shard: ShardSettings = Field(default_factory=ShardSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init kwargs) win over the environment, which wins over the YAML file."""
        del dotenv_settings, file_secret_settings
        return (init_settings, env_settings, _YamlSource(settings_cls))

    @property
    def scrape_limits(self) -> ScrapeLimits:
        """The global scrape limits (a target's own settings win over them)."""
        return ScrapeLimits(self.sample_limit, self.label_limit, self.label_value_length_limit)

    @model_validator(mode="after")
    def target_names_unique(self) -> "Settings":
        """Two targets may not share a `target` label value."""
        seen: set[str] = set()
        for target in self.targets:
            if target.target_name in seen:
                raise ValueError(f"duplicate target name {target.target_name!r}")
            seen.add(target.target_name)
        return self

    @model_validator(mode="after")
    def timeout_below_interval(self) -> "Settings":
        """A scrape must end before the next one starts."""
        if self.scrape_timeout_seconds >= self.scrape_interval_seconds:
            raise ValueError("scrape_timeout_seconds must be below scrape_interval_seconds")
        return self

    @model_validator(mode="after")
    def query_timeout_below_round(self) -> "Settings":
        """A Prometheus round (one per evaluation interval) must end before the next starts."""
        timeout = self.prometheus.timeout_seconds if self.prometheus else 0.0
        if timeout >= self.evaluation_interval_seconds:
            raise ValueError("prometheus.timeout_seconds must be below evaluation_interval_seconds")
        return self


_YAML_DATA: ContextVar[dict[str, Any] | None] = ContextVar("yaml_data", default=None)


class _YamlSource(PydanticBaseSettingsSource):
    """The YAML file's contents, lowest priority (set by `load_settings`)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        """Unused: `__call__` returns the whole mapping."""
        del field
        return (_YAML_DATA.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_YAML_DATA.get() or {})


class ConfigError(Exception):
    """Invalid configuration; `problems` lists every one as 'path: message'."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(problems))
        self.source = source
        self.problems = problems


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _problems(err: ValidationError) -> list[str]:
    return [f"{_path(e['loc'])}: {e['msg']}" for e in err.errors()]


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read: {exc.strerror}"]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [f"not valid YAML: {exc}"]) from exc
    if data is None:
        raise ConfigError(str(path), ["(top level): the file is empty (start from targets:)"])
    if not isinstance(data, dict):
        raise ConfigError(str(path), ["(top level): must be a mapping of settings"])
    return data


# Tuning-rule id -> the names of its thresholds (the rule catalogue, passed in by the CLI).
Catalogue = Mapping[str, Collection[str]]


def load_settings(
    path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    catalogue: Catalogue | None = None,
) -> Settings:
    """Settings from the YAML file, the environment and flag overrides; with a catalogue, rule
    ids and threshold names are checked too. Every problem at once, in one ConfigError."""
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    data = _read_yaml(path) if path else {}
    token = _YAML_DATA.set(data)
    settings, problems = None, []
    try:
        settings = Settings(**flags)
    except ValidationError as exc:
        problems = _problems(exc)
    finally:
        _YAML_DATA.reset(token)
    if catalogue is not None:
        rules = settings.rules if settings is not None else data.get("rules")
        problems += rule_override_problems(rules, catalogue)
    if settings is None or problems:
        raise ConfigError(str(path or "settings"), problems)
    return settings


def rule_override_problems(rules: object, catalogue: Catalogue) -> list[str]:
    """Problems with `rules:`: ids that name no tuning rule, thresholds the rule does not have."""
    if not isinstance(rules, Mapping):
        return []
    problems = []
    for rule_id, override in rules.items():
        if rule_id not in catalogue:
            known = ", ".join(sorted(catalogue))
            problems.append(f"rules.{rule_id}: unknown tuning rule (known: {known})")
            continue
        thresholds = getattr(override, "thresholds", None)
        if thresholds is None and isinstance(override, Mapping):
            thresholds = override.get("thresholds")
        for name in thresholds if isinstance(thresholds, Mapping) else ():
            if name not in catalogue[rule_id]:
                known = ", ".join(sorted(catalogue[rule_id])) or "none"
                where = f"rules.{rule_id}.thresholds.{name}"
                problems.append(f"{where}: unknown threshold of {rule_id} (known: {known})")
    return problems


def external_url(settings: Settings) -> str:
    """Our URL as users reach it (alert links): `external_url`, else from the listen address."""
    if settings.external_url:
        return settings.external_url.rstrip("/")
    host = "localhost" if settings.listen_host in ("0.0.0.0", "::", "") else settings.listen_host
    return f"http://{host}:{settings.listen_port}"
