"""Value types every step of the flow shares: snapshots, server config, outcomes, advice.

The bottom of the house: this module imports nothing else of the package, and every other
module may import it. Everything here is immutable.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

PROFILES: tuple[str, ...] = ("offline", "online", "long_context", "multi_turn")


class Severity(StrEnum):
    """How urgent the advice is."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Confidence(StrEnum):
    """How much data backs a finding (VPA-style: grows with the share of the window observed)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Health(StrEnum):
    """Could the tuning rule be judged (not: is its advice alerting)."""

    OK = "ok"
    ERR = "err"
    NO_DATA = "no_data"


class AlertState(StrEnum):
    """Is the advice alerting (not: could the rule be judged). Prometheus's names."""

    INACTIVE = "inactive"  # condition false, or resolved and kept only to re-send the resolve
    PENDING = "pending"  # condition true for less than hold_for: visible, never sent
    FIRING = "firing"  # condition held for hold_for (or still within keep_firing_for): sent


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape of one target as canonical signals (`signals.py`); absent = not exposed."""

    target: str
    ts: float
    values: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The tuning knobs a server runs with, read from `/server_info` (secrets already redacted).

    `None` means the server did not say (older version, field absent, or CLI value unset).
    """

    version: str | None = None
    model_path: str | None = None
    schedule_conservativeness: float | None = None
    mem_fraction_static: float | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None  # effective value where the server reports it
    max_running_requests_per_dp: int | None = None  # effective per DP rank (>= v0.5.9)
    cuda_graph_max_bs: int | None = None  # resolved across the v0.5.14 rename
    disable_cuda_graph: bool | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    pp_size: int | None = None
    enable_dp_attention: bool | None = None
    enable_metrics_for_all_schedulers: bool | None = None
    schedule_policy: str | None = None
    attention_backend: str | None = None  # resolved value (internal_states first)
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    enable_torch_compile: bool | None = None
    disable_radix_cache: bool | None = None
    max_total_num_tokens: int | None = None
    context_length: int | None = None
    startup_available_gpu_mem_gb: float | None = None
    gpu_model: str | None = None  # from DCGM or the target's config, when known
    raw: Mapping[str, Any] = field(default_factory=dict)  # the redacted body, for /targets


@dataclass(frozen=True, slots=True)
class QueryStatus:
    """One query of the Prometheus source: its latest run and its counts since start."""

    name: str  # stable short name, the `query` label (the canonical signal it answers)
    expr: str
    ts: float | None = None  # when it last ran
    duration_seconds: float | None = None
    series: int = 0  # series in the latest answer
    error_reason: str | None = None  # one of values_scrape.QUERY_FAILURE_REASONS, latest run
    error: str | None = None
    warnings: tuple[str, ...] = ()  # latest answer's warnings (e.g. a partial response)
    runs_total: int = 0
    failures_total: Mapping[str, int] = field(default_factory=dict)
    warnings_total: int = 0  # answers that carried warnings


@dataclass(frozen=True, slots=True)
class Action:
    """The change to make: `flag current -> suggested`, or a non-flag instruction in `text`.

    `companions` are flags changed in the same restart (e.g. `--mem-fraction-static` lowered
    to pay for more CUDA graphs); `expected` says what the change should move, by about how
    much, and on what basis.
    """

    text: str
    flag: str | None = None
    current: str | None = None
    suggested: str | None = None
    note: str = ""
    expected: str = ""
    companions: tuple["Action", ...] = ()

    def flags(self) -> dict[str, str]:
        """Every flag this change sets, with its value (the restart's command-line delta)."""
        changes = [self, *self.companions]
        return {a.flag: a.suggested for a in changes if a.flag and a.suggested is not None}


# Outcomes: not frozen, for speed (230,000 a round at 10,000 targets; frozen __init__ is 4x slower)
@dataclass(slots=True)
class Finding:
    """The rule's condition holds: advice with its evidence."""

    evidence: str
    action: Action
    confidence: Confidence
    condition_ratio: float | None = None
    samples: int = 0
    # Set by a rule that expects little of its change here (e.g. under 3 % throughput): the
    # finding's severity instead of the rule's, unless the user configured one.
    severity: Severity | None = None


@dataclass(slots=True)
class NoData:
    """The rule could not be judged; `reason` says why and when to ask again."""

    reason: str
    retry_after_seconds: float


@dataclass(slots=True)
class Pass:
    """Judged, condition not met."""

    condition_ratio: float | None = None
    samples: int = 0
    detail: str = ""


Outcome = Finding | NoData | Pass


@dataclass(frozen=True, slots=True)
class Advice:
    """A pending or firing piece of advice, as `/advice` serves it and an alert carries it."""

    target: str
    rule: str
    severity: Severity
    state: str
    since: float
    summary: str
    evidence: str
    action: Action
    source: str
    confidence: Confidence
    condition_ratio: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


# The tuning flags the advice turns, by command-line spelling -> `ServerConfig` field.
FLAG_FIELDS: Mapping[str, str] = {
    "--schedule-conservativeness": "schedule_conservativeness",
    "--mem-fraction-static": "mem_fraction_static",
    "--chunked-prefill-size": "chunked_prefill_size",
    "--max-running-requests": "max_running_requests",
    "--cuda-graph-max-bs": "cuda_graph_max_bs",
    "--cuda-graph-max-bs-decode": "cuda_graph_max_bs",  # the v0.5.14+ spelling
    "--schedule-policy": "schedule_policy",
    "--attention-backend": "attention_backend",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--quantization": "quantization",
    "--tp-size": "tp_size",
    "--dp-size": "dp_size",
}


@dataclass(frozen=True, slots=True)
class FlagOutcome:
    """A value one tuning flag had on this server, and how it went."""

    value: float | str
    ts: float  # when it was last seen running safely, or when the server crashed with it
    crash: str | None = None  # the crash signal (e.g. prefill_oom_events); None: ran safely
    too_low: bool = False  # the crash says the value was too low (startup: pool too small)


@dataclass(frozen=True, slots=True)
class FlagHistory:
    """Per `ServerConfig` field: the last value that ran safely and the last one that crashed."""

    safe: Mapping[str, FlagOutcome] = field(default_factory=dict)
    failing: Mapping[str, FlagOutcome] = field(default_factory=dict)

    def crashes_with(self, flag: str, value: float | str) -> FlagOutcome | None:
        """The crash a suggested value would repeat: at or past the last failing value."""
        failed = self.failing.get(FLAG_FIELDS.get(flag, flag))
        if failed is None:
            return None
        if isinstance(failed.value, str) or isinstance(value, str):
            return failed if str(failed.value) == str(value) else None
        crossed = value <= failed.value if failed.too_low else value >= failed.value
        return failed if crossed else None


_USERINFO = re.compile(r"(\w+://)[^/@\s]*@")


def redact_userinfo(text: str) -> str:
    """`text` with every URL's `user:password@` removed (for names, logs, the API, the store)."""
    return _USERINFO.sub(r"\1", text)


def read_key_file(path: Path) -> str:
    """A key or password file: one non-empty line (a trailing newline is fine); never shown."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"cannot read {path}: {reason}") from None
    lines = text.rstrip("\r\n").splitlines()
    if len(lines) != 1 or not lines[0].strip():
        found = "empty" if not lines else f"{len(lines)} lines"
        raise ValueError(f"{path} must hold the secret on one line ({found})")
    return lines[0].strip()
