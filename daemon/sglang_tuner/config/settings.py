"""Settings: one YAML file, then SGLANG_TUNER_* environment variables, then command-line flags.

The schema, reading no file: `loading.py` reads the YAML and lists every problem at once with
its YAML path (`targets[1].url: ...`; the CLI exits 2), `problems.py` words them. A target's
settings are in `target_settings.py`, the services' in `services.py`.
"""

import json
import re
from contextvars import ContextVar
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from sglang_tuner.config.cross_checks import CrossChecked
from sglang_tuner.config.duration import Duration
from sglang_tuner.config.listen import format_listen_address, parse_listen_address
from sglang_tuner.config.problems import (
    ConfigError,
)
from sglang_tuner.config.services import BasicAuthSettings, PrometheusSettings, TLSSettings
from sglang_tuner.config.target_settings import (
    LABEL_LIMIT_HELP,
    SAMPLE_LIMIT_HELP,
    VALUE_LIMIT_HELP,
    FileSDSettings,
    ProfileLevelSettings,
    ShardSettings,
    TargetSettings,
    checked_url,
)
from sglang_tuner.model.scrape import ScrapeLimits
from sglang_tuner.model.service_levels import ServiceLevels

# Re-exported: the services' settings (`config/services.py`), and ConfigError for `cli/run.py`.
__all__ = ["BasicAuthSettings", "ConfigError", "PrometheusSettings", "ShardSettings", "TLSSettings"]
_LIMITS = ScrapeLimits()


class _Strict(CrossChecked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RuleSettings(_Strict):
    """Per-rule overrides, keyed by rule id in `rules:`."""

    enabled: bool = True
    frequently_ratio: float | None = Field(None, gt=0, le=1)
    window_seconds: Duration | None = Field(None, gt=0)
    hold_for_seconds: Duration | None = Field(None, ge=0)
    keep_firing_for_seconds: Duration | None = Field(None, ge=0)
    severity: Literal["info", "warning", "critical"] | None = None
    thresholds: dict[str, float] = Field(default_factory=dict)


class AlertmanagerSettings(_Strict):
    """Where and how to push alerts (Alertmanager API v2)."""

    urls: list[str] = Field(
        default_factory=list, description="Alertmanager base URLs (all get every alert)"
    )
    resend_delay_seconds: Duration = Field(
        60.0, gt=0, description="Re-send firing alerts this often"
    )
    timeout_seconds: Duration = Field(10.0, gt=0, description="Per-request timeout")
    queue_capacity: int = Field(10000, gt=0, description="Pending alerts kept while AM is down")
    basic_auth: BasicAuthSettings | None = None
    bearer_token_file: Path | None = None
    tls: TLSSettings = Field(default_factory=TLSSettings)

    @field_validator("urls")
    @classmethod
    def urls_are_http(cls, value: list[str]) -> list[str]:
        """Every URL is http(s) with a valid port."""
        return [checked_url(url) for url in value]


class Settings(BaseSettings, CrossChecked):
    """All daemon settings. Durations are float seconds (written as seconds or `15s`, `5m`)."""

    model_config = SettingsConfigDict(
        env_prefix="SGLANG_TUNER_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    targets: Annotated[list[TargetSettings], NoDecode] = Field(
        default_factory=list,
        description="SGLang servers (SGLANG_TUNER_TARGETS: a JSON list, or URLs separated by "
        "commas or spaces)",
    )
    file_sd: list[FileSDSettings] = Field(default_factory=list, description="file_sd sources")
    scrape_interval_seconds: Duration = Field(
        5.0, gt=0, description="Scrape every target this often"
    )
    scrape_timeout_seconds: Duration = Field(
        3.0, gt=0, description="Give up on a scrape after this"
    )
    max_body_bytes: int = Field(16 * 1024 * 1024, gt=0, description="Largest /metrics body read")
    sample_limit: int = Field(_LIMITS.sample_limit, ge=0, description=SAMPLE_LIMIT_HELP)
    label_limit: int = Field(_LIMITS.label_limit, ge=0, description=LABEL_LIMIT_HELP)
    label_value_length_limit: int = Field(
        _LIMITS.label_value_length_limit, ge=0, description=VALUE_LIMIT_HELP
    )
    server_info_interval_seconds: Duration = Field(300.0, gt=0, description="Re-read /server_info")
    unreachable_retry_seconds: Duration = Field(
        60.0,
        ge=0,
        description="A target refusing connections (or unresolvable) this long is tried this "
        "often instead of every scrape interval (0: every interval, as Prometheus does)",
    )
    evaluation_interval_seconds: Duration = Field(
        15.0, gt=0, description="Judge each target's rules this often (right after a scrape)"
    )
    window_seconds: Duration = Field(300.0, gt=0, description="Default rule window")
    frequently_ratio: float = Field(0.5, gt=0, le=1, description='"Frequently" = share of samples')
    min_samples: int = Field(6, ge=1, description="Samples a window needs before rules judge it")
    hold_for_seconds: Duration = Field(120.0, ge=0, description="Pending this long before firing")
    verify_warmup_seconds: Duration = Field(
        60.0,
        ge=0,
        description="After a restart with new flags, skip at least this long "
        "(longer when requests take longer: two service times) before comparing",
    )
    verify_window_seconds: Duration = Field(
        600.0,
        gt=0,
        description="Length of the windows compared before and after a change "
        "(ten minutes: a verdict on a 5 % effect needs that much of a noisy server)",
    )
    keep_firing_for_seconds: Duration = Field(
        300.0, ge=0, description="Keep firing after it clears"
    )
    listen_host: str = Field("0.0.0.0", description="API and /metrics address")
    listen_port: int = Field(9877, ge=0, le=65535, description="API and /metrics port")
    listen_addresses: list[str] = Field(
        default_factory=list,
        description="Addresses to serve on, host:port (':9877' = every interface, "
        "'[::1]:9877'), as --web.listen-address gives them; replace listen_host/listen_port",
    )
    web_config_file: Path | None = Field(
        None, description="TLS and basic auth for the API: a web config file (exporter-toolkit's)"
    )
    web_auth_exempt_paths: list[Literal["/healthz", "/readyz"]] = Field(
        default_factory=list, description="Paths answered without basic auth, for probes"
    )
    web_enable_lifecycle: bool = Field(
        False,
        description="Serve POST /-/reload (as Prometheus's --web.enable-lifecycle); read at "
        "start. SIGHUP reloads either way",
    )
    external_url: str | None = Field(None, description="Our URL as others reach it (alert links)")
    database: Path = Field(Path("sglang-tuner.db"), description="SQLite file for history")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    rules: dict[str, RuleSettings] = Field(default_factory=dict, description="Per-rule overrides")
    service_levels: ProfileLevelSettings = Field(
        default_factory=ProfileLevelSettings,
        description="Each profile's service levels (offline, online, long_context, "
        "multi_turn), over the built-in ones; a target's own service_levels win over them",
    )
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

    @cached_property
    def profile_levels(self) -> dict[str, ServiceLevels]:
        """`service_levels` as the model's values, per profile."""
        return self.service_levels.by_profile()

    @property
    def scrape_limits(self) -> ScrapeLimits:
        """The global scrape limits (a target's own settings win over them)."""
        return ScrapeLimits(self.sample_limit, self.label_limit, self.label_value_length_limit)

    @field_validator("targets", mode="before")
    @classmethod
    def targets_from_text(cls, value: Any) -> Any:
        """SGLANG_TUNER_TARGETS as given: a JSON list of targets, or just their URLs."""
        if not isinstance(value, str):
            return value
        if value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not a JSON list of targets ({exc}), nor URLs") from None
        return [{"url": url} for url in re.split(r"[,\s]+", value.strip()) if url]

    @field_validator("listen_addresses")
    @classmethod
    def listen_addresses_are_host_port(cls, value: list[str]) -> list[str]:
        """Each is host:port, as --web.listen-address takes it."""
        for address in value:
            parse_listen_address(address)
        return value

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
    def one_target_reads_standard_input(self) -> "Settings":
        """`log_file: "-"` (the daemon's standard input) can be one target's log only."""
        readers = [t.target_name for t in self.targets if str(t.log_file) == "-"]
        if len(readers) > 1:
            raise ValueError(
                f"log_file '-' (standard input) is set on {len(readers)} targets "
                f"({', '.join(readers)}): one pipe can be one target's log"
            )
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


def listen_endpoints(settings: Settings) -> list[tuple[str, int]]:
    """Every (host, port) the API listens on: `listen_addresses`, else listen_host:listen_port."""
    if settings.listen_addresses:
        return [parse_listen_address(a) for a in settings.listen_addresses]
    return [(settings.listen_host, settings.listen_port)]


def external_url(settings: Settings) -> str:
    """Our URL as users reach it (alert links): `external_url`, else from the first listen
    address."""
    if settings.external_url:
        return settings.external_url.rstrip("/")
    host, port = listen_endpoints(settings)[0]
    host = "localhost" if host in ("0.0.0.0", "::", "") else host
    return f"http://{format_listen_address(host, port)}"
