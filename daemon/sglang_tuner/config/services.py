"""Settings of the services we call (auth, TLS), of a fleet read through a Prometheus-compatible
query API, and of this replica's shard. Part of `settings.py`'s schema."""

import re
import string
from pathlib import Path

from pydantic import ConfigDict, Field, field_validator, model_validator

from sglang_tuner.config.cross_checks import CrossChecked
from sglang_tuner.config.duration import Duration
from sglang_tuner.model.server_config import Profile

_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_MATCHER = r'\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_MATCHERS_RE = re.compile(rf"^(?:{_MATCHER}(?:,{_MATCHER})*,?\s*)?$")


class _Strict(CrossChecked):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TLSSettings(_Strict):
    """TLS options for a connection we open (Alertmanager, Prometheus)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    insecure_skip_verify: bool = False


class BasicAuthSettings(_Strict):
    """HTTP basic auth; the password is read from a file, never from the YAML."""

    username: str
    password_file: Path


def template_fields(template: str) -> set[str]:
    """The `{field}` names a str.format template uses."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


class PrometheusSettings(_Strict):
    """Read the fleet from a Prometheus-compatible query API (Prometheus, Thanos, Mimir,
    VictoriaMetrics) instead of scraping every server: a fixed set of queries per round."""

    url: str = Field(description="Base URL of the query API, e.g. http://prometheus:9090")
    selector: str = Field(
        "", description='Extra label matchers for every SGLang series, e.g. job="sglang"'
    )
    target_labels: list[str] = Field(
        default_factory=lambda: ["instance", "job"],
        min_length=1,
        description="Labels whose values tell one SGLang server from another",
    )
    target_name_template: str = Field(
        "{instance}", description="The `target` name from those labels (str.format fields)"
    )
    server_url_label: str | None = Field(
        None, description="A target label holding the server's URL, for /server_info"
    )
    server_url_template: str | None = Field(
        None, description="The server's URL from the target labels, e.g. http://{instance}"
    )
    api_key_file: Path | None = Field(None, description="File holding the servers' --api-key")
    api_key_env: str | None = Field(None, description="Environment variable holding --api-key")
    profile: Profile | None = Field(
        None, description="Workload profile of the fleet's targets (unset: inferred per target)"
    )
    rate_window_seconds: Duration = Field(
        60.0, gt=0, description="Range of rate() and histogram_quantile(): >= 4 scrape intervals"
    )
    timeout_seconds: Duration = Field(10.0, gt=0, description="Per-query timeout")
    max_concurrent_queries: int = Field(4, ge=1, description="Queries in flight at once")
    max_answer_bytes: int = Field(
        256 * 1024 * 1024, ge=1024,
        description="Largest answer read (after gzip); a larger one fails its query (too_large)",
    )  # fmt: skip
    forget_after_seconds: Duration = Field(
        3600.0, gt=0, description="Drop a target that has had no series this long"
    )
    backfill: bool = Field(True, description="Fill the windows from query_range at start")
    tenant: str | None = Field(None, description="X-Scope-OrgID header (Mimir, Cortex tenants)")
    basic_auth: BasicAuthSettings | None = None
    bearer_token_file: Path | None = None
    tls: TLSSettings = Field(default_factory=TLSSettings)

    @field_validator("url")
    @classmethod
    def url_is_http(cls, value: str) -> str:
        """Only http(s) URLs; the trailing slash is dropped."""
        if not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("selector")
    @classmethod
    def selector_is_matchers(cls, value: str) -> str:
        """Comma-separated PromQL label matchers, without braces."""
        if not _MATCHERS_RE.match(value):
            raise ValueError('must be label matchers like job="sglang", namespace=~"llm-.*"')
        return value.strip().rstrip(",")

    @field_validator("target_labels")
    @classmethod
    def labels_are_names(cls, value: list[str]) -> list[str]:
        """Valid, distinct Prometheus label names."""
        bad = [name for name in value if not _LABEL_RE.match(name) or name == "__name__"]
        if bad or len(set(value)) != len(value):
            raise ValueError(f"must be distinct label names (bad: {bad or 'duplicates'})")
        return value

    @model_validator(mode="after")
    def templates_use_target_labels(self) -> "PrometheusSettings":
        """Names and URLs can only be made of the labels the series are grouped by."""
        known = set(self.target_labels)
        templates = [("target_name_template", self.target_name_template)]
        templates += [("server_url_template", self.server_url_template or "")]
        for field, template in templates:
            unknown = template_fields(template) - known
            if unknown:
                raise ValueError(f"{field} uses {sorted(unknown)}: not in target_labels")
        if self.server_url_label is not None and self.server_url_label not in known:
            raise ValueError("server_url_label must be one of target_labels")
        if self.server_url_label is not None and self.server_url_template is not None:
            raise ValueError("server_url_label and server_url_template are exclusive")
        return self
