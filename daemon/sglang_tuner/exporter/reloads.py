"""Whether the last configuration reload worked, as Prometheus and Alertmanager export it: the
Prometheus Operator's config reloader and the usual "config reload failed" alert read these.

    sglang_tuner_config_last_reload_successful 1.0
    sglang_tuner_config_last_reload_success_timestamp_seconds 1.795e+09

At start the configuration just read counts as a successful load (as Prometheus does), so the
timestamp is the start time until the first reload.
"""

import threading
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class ReloadStatus(Collector):
    """The outcome of the last reload (SIGHUP or POST /-/reload) and when one last worked."""

    def __init__(self, started_at: float | None = None) -> None:
        self._lock = threading.Lock()
        self.successful = True
        self.success_ts = time.time() if started_at is None else started_at
        self.failures_total = 0

    def record(self, ok: bool, when: float | None = None) -> None:
        """A reload ended: worked (`ok`) or was refused, keeping the running configuration."""
        with self._lock:
            self.successful = ok
            if ok:
                self.success_ts = time.time() if when is None else when
            else:
                self.failures_total += 1

    def collect(self) -> Iterator[Metric]:
        """The three families (read on every `/metrics` request, never cached)."""
        with self._lock:
            ok, ts, failures = self.successful, self.success_ts, self.failures_total
        yield GaugeMetricFamily(
            "sglang_tuner_config_last_reload_successful",
            "1 if the last configuration reload worked; 0: the daemon runs on the previous "
            "configuration (see its log for why).",
            value=1.0 if ok else 0.0,
        )
        yield GaugeMetricFamily(
            "sglang_tuner_config_last_reload_success_timestamp_seconds",
            "Unix time of the last configuration load that worked (the start, until a reload).",
            value=ts,
        )
        yield CounterMetricFamily(
            "sglang_tuner_config_reload_failures",
            "Configuration reloads refused (invalid file): the running configuration was kept.",
            value=failures,
        )
