"""The targets of a fleet read through Prometheus: names from label sets, this replica's shard,
who is missing and why, restarts from counter resets, and each target's `/server_info` reads."""

import logging
from collections.abc import Mapping

from sglang_tuner.config.credentials import api_key
from sglang_tuner.config.discovery import in_shard
from sglang_tuner.config.settings import PrometheusSettings, ShardSettings
from sglang_tuner.model.scrape import ScrapeResult, Snapshot
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.signals import RESTARTS
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.prometheus.promql import COUNTER_RESETS, signals_from
from sglang_tuner.sources.server_info import fetch_server_info

logger = logging.getLogger(__name__)
NO_SERVER_URL = (
    "the server's URL is unknown, so its /server_info is not read: set "
    "prometheus.server_url_template (check --prometheus: --server-url-template), e.g. "
    "http://{instance}, or prometheus.server_url_label"
)
Parts = dict[str, dict[str, float]]  # target name -> part (query name) -> value


class FleetTargets:
    """Every target this replica has seen in Prometheus and not yet forgotten."""

    def __init__(self, settings: PrometheusSettings, shard: ShardSettings) -> None:
        self._settings, self._shard = settings, shard
        self._labels = tuple(settings.target_labels)
        self._token = api_key(settings.api_key_file, settings.api_key_env)
        # label values (None: label absent) -> name (None: not ours); per answer series, so cheap
        self._names: dict[tuple[str | None, ...], str | None] = {}
        self._owner: dict[str, tuple[str | None, ...]] = {}  # name -> the values that claimed it
        self.specs: dict[str, TargetSpec] = {}
        self._seen: dict[str, float] = {}  # when each target last had series
        self._resets: dict[str, float] = {}  # counter resets in the window, previous round

    def name_of(self, labels: Mapping[str, str]) -> str | None:
        """The target name of a series (None: another shard's, or a clashing name)."""
        key = tuple(map(labels.get, self._labels))
        name = self._names.get(key, "")
        if name == "":
            name = self._names[key] = self._claim(key)
        return name

    def known_name(self, labels: Mapping[str, str]) -> str | None:
        """The name of a known target these labels belong to (never claims a new name)."""
        name = self._names.get(tuple(map(labels.get, self._labels)))
        return name if name in self.specs else None

    def _claim(self, key: tuple[str | None, ...]) -> str | None:
        values = {label: value or "" for label, value in zip(self._labels, key, strict=True)}
        name = self._settings.target_name_template.format(**values)
        if not in_shard(name, self._shard):
            return None
        owner = self._owner.setdefault(name, key)
        if owner != key:
            logger.warning(
                "target name %r comes from two label sets (%s and %s): the second is ignored; "
                "make prometheus.target_name_template use every target label", name, owner, key,
            )  # fmt: skip
            return None
        return name

    def _spec(self, name: str) -> TargetSpec:
        values = {label: v or "" for label, v in zip(self._labels, self._owner[name], strict=True)}
        s = self._settings
        url = s.server_url_template.format(**values) if s.server_url_template else ""
        if s.server_url_label:
            url = values[s.server_url_label]
            url = url if "://" in url else f"http://{url}"
        return TargetSpec(name, url.rstrip("/"), s.profile, token=self._token)

    def observe(
        self,
        parts: Parts,
        up: Mapping[str, float],
        ts: float,
        duration: float,
        warnings: tuple[str, ...] = (),
    ) -> dict[str, ScrapeResult]:
        """A round's answers: a snapshot for each target with series, 'no_series' for the known
        ones without (`up`: Prometheus's own scrape health, to say why); a target without
        series for `forget_after_seconds` is forgotten."""
        results = {name: self._snapshot(name, p, ts, duration) for name, p in parts.items() if p}
        for name in list(self.specs):  # the known ones without series this round
            if name in results:
                continue
            if ts - self._seen[name] > self._settings.forget_after_seconds:
                self._forget(name)
                continue
            error = _why_missing(up.get(name), warnings)
            results[name] = ScrapeResult(name, ts, duration, error_reason="no_series", error=error)
        return results

    def replay(self, parts: Parts, ts: float, duration: float) -> dict[str, ScrapeResult]:
        """One step of the history read at start: snapshots only (a gap is not a failure)."""
        return {name: self._snapshot(name, p, ts, duration) for name, p in parts.items() if p}

    def fail(self, ts: float, duration: float, reason: str, error: str) -> dict[str, ScrapeResult]:
        """A round whose queries failed: every known target gets the reason, windows untouched."""
        return {
            name: ScrapeResult(name, ts, duration, error_reason=reason, error=error)
            for name in self.specs
        }

    def _snapshot(self, name: str, parts: dict[str, float], ts: float, dt: float) -> ScrapeResult:
        values = signals_from(parts)
        count = parts.get(COUNTER_RESETS, 0.0)
        previous, seen = self._resets.get(name), self._seen.get(name)
        if previous is not None and seen is not None:
            # A reset enters the window once: the count rises. Back after a longer absence than
            # the window, the pair of samples around the reset is never in one window.
            away = ts - seen > self._settings.rate_window_seconds
            values[RESTARTS] = 1.0 if count > previous or away else 0.0
        self._resets[name], self._seen[name] = count, ts
        if name not in self.specs:
            self.specs[name] = self._spec(name)
        return ScrapeResult(name, ts, dt, snapshot=Snapshot(name, ts, values))

    def _forget(self, name: str) -> None:
        del self.specs[name], self._seen[name], self._owner[name]
        self._resets.pop(name, None)
        self._names = {key: n for key, n in self._names.items() if n != name}
        logger.info("target %s forgotten: no series in Prometheus for a while", name)


def _why_missing(up: float | None, warnings: tuple[str, ...]) -> str:
    """One line on why a known target had no SGLang series this round (`up`: 0 when
    Prometheus's own scrape of it fails, else None)."""
    if up == 0:
        why = "Prometheus cannot scrape it (up == 0): the server is down or /metrics fails"
    else:
        why = "no series in Prometheus this round (not scraped any more, its series went stale, "
        why += "or it serves no SGLang metrics)"
    return why + (f"; the answer was partial: {warnings[0]}" if warnings else "")


class FleetTargetSource:
    """A fleet target's own reads: `/server_info` when its URL is known, over a shared pool."""

    def __init__(self, spec: TargetSpec, client: HttpClient) -> None:
        self.spec = spec
        self.client = client
        self.server_info_ts = 0.0  # when /server_info was last asked for

    async def server_info(self, timeout_seconds: float) -> tuple[ServerConfig | None, str | None]:
        """`/server_info` (or `/get_server_info`): (config, None) or (None, error)."""
        if not self.spec.url:
            return None, NO_SERVER_URL
        return await fetch_server_info(
            self.client, self.spec.url, token=self.spec.token, timeout_seconds=timeout_seconds
        )

    def launched(self) -> ServerConfig | None:
        """A fleet target has no log to read launch flags from."""
        return None

    async def dcgm(self, timeout_seconds: float) -> dict[str, float | str]:
        """No DCGM exporter is known for a fleet target."""
        del timeout_seconds
        return {}

    async def aclose(self) -> None:
        """Nothing to close: the pool belongs to the Prometheus source."""
