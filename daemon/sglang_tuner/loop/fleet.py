"""The loop's Prometheus mode: the source's rounds keep the discovered targets' states in step.

The loop calls `history` once at start and `source.round` every evaluation interval and hands
each `FleetRound` to `apply`; this module does no scheduling and reads no clock.
"""

from collections.abc import Callable, Iterator, Mapping, MutableMapping

from sglang_tuner.config.settings import Settings
from sglang_tuner.model.scrape import QueryStatus, ScrapeResult
from sglang_tuner.server import WatchedServer
from sglang_tuner.sources.prometheus.source import FleetRound, PrometheusSource
from sglang_tuner.sources.prometheus.targets import FleetTargetSource
from sglang_tuner.sources.target import TargetSource
from sglang_tuner.target_state import TargetState
from sglang_tuner.watch import Watch


class Fleet:
    """The Prometheus source, the names of the targets it discovered, and its latest status.
    Its servers are sampled once per round (`WatchedServer.rounds`)."""

    def __init__(self, settings: Settings) -> None:
        assert settings.prometheus is not None
        interval = settings.evaluation_interval_seconds
        self.source = PrometheusSource(settings.prometheus, settings.shard, interval)
        self.names: set[str] = set()
        self.queries: tuple[QueryStatus, ...] = self.source.statuses
        self._history_due = settings.prometheus.backfill
        # With the history read from Prometheus at start, stored windows are never needed.
        self.stores_windows = not settings.prometheus.backfill

    async def history(self, now: float, span_seconds: float) -> Iterator[FleetRound]:
        """The recent past as rounds, the first time only (then nothing)."""
        if not self._history_due:
            return iter(())
        self._history_due = False
        return await self.source.backfill(now, span_seconds)

    def apply(
        self,
        fleet_round: FleetRound,
        *,
        watch: Watch,
        sources: MutableMapping[str, TargetSource | FleetTargetSource],
        remove: Callable[[str], None],
        restore: Callable[[Mapping[str, TargetState]], None],
        log: Callable[[TargetState, ScrapeResult], None],
    ) -> None:
        """Add the targets the round discovered (a configured target of the same name wins;
        what the store kept of them is restored first), remove the ones it forgot, and let each
        ingest its result, as after a scrape (reviewed by the round, not here)."""
        for name in self.names - fleet_round.specs.keys():
            self.names.discard(name)
            remove(name)
        servers = watch.servers
        new: dict[str, WatchedServer] = {
            n: watch.new_server(s, rounds=True)
            for n, s in fleet_round.specs.items()
            if n not in servers
        }
        if new:
            restore({n: s.state for n, s in new.items()})
        for name, server in new.items():
            watch.add(server)
            sources[name] = FleetTargetSource(server.state.spec, self.source.servers)
            self.names.add(name)
        for name, result in fleet_round.results.items():
            found = servers.get(name)
            if found is not None and name in self.names:
                log(found.state, result)
                found.state.ingest(result)
        self.queries = fleet_round.queries

    async def aclose(self) -> None:
        """Close the source's connections."""
        await self.source.aclose()


def fleet_changed(old: Settings, new: Settings) -> bool:
    """True when a reload changes what the Prometheus source reads, or how often."""
    keys = ("prometheus", "shard", "evaluation_interval_seconds")
    return any(getattr(old, k) != getattr(new, k) for k in keys)
