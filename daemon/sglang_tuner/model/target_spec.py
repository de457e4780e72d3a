"""One SGLang server to watch, as every step knows it: its name, URL, profile, service levels,
labels, its own scrape limits and TLS, resolved from the config or a file_sd file."""

from dataclasses import dataclass, field
from pathlib import Path

from sglang_tuner.model.service_levels import ServiceLevels


@dataclass(frozen=True, slots=True)
class TargetTLS:
    """Prometheus' `tls_config` for one target's requests (/metrics, /server_info)."""

    ca_file: Path | None = None  # None: the system's trust store
    cert_file: Path | None = None  # client certificate (mutual TLS), with key_file
    key_file: Path | None = None
    server_name: str | None = None  # the name the certificate must carry (and SNI)
    insecure_skip_verify: bool = False


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """One SGLang server to watch, resolved from config or file_sd."""

    name: str
    url: str
    profile: str | None = None  # None: inferred from the traffic
    labels: dict[str, str] = field(default_factory=dict)
    token: str | None = field(default=None, repr=False)  # the server's --api-key; never logged
    log_file: Path | None = None  # "-": the daemon's standard input
    log_command: tuple[str, ...] = ()  # a command whose output is the log
    dcgm_url: str | None = None
    gpu_model: str | None = None
    legacy_guide: bool = False
    limits: dict[str, int] = field(default_factory=dict)  # own `ScrapeLimits` over the global
    tls: TargetTLS | None = None  # None: the default verification of https URLs
    gateway: bool = False  # the URL is an SGLang Model Gateway: one target per worker
    service_levels: ServiceLevels | None = None  # its own; each one unset: the profile's
