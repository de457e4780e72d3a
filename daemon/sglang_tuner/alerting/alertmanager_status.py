"""What the Alertmanager client reports of its push path: counters per Alertmanager URL, the
queue. Plain values, kept beside the client so the published evaluation can carry them without
importing the client."""

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class AlertmanagerStatus:
    """Counters of the Alertmanager push path, per Alertmanager URL."""

    sends_total: Mapping[str, int] = field(default_factory=dict)
    send_failures_total: Mapping[str, int] = field(default_factory=dict)
    alerts_sent_total: Mapping[str, int] = field(default_factory=dict)
    queue_length: int = 0
    dropped_total: int = 0
    last_error: str | None = None
