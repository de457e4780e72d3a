"""The loop's targets and settings applied: which targets are watched (the static ones and
file_sd's, this replica's share; the Prometheus source's own), and what a new configuration
changes (SIGHUP): targets added, kept or removed, the Prometheus source restarted, the scrape
loops retimed and the windows resized.

`Reconfiguring` is mixed into `loop.Tuner`, which owns the state it declares and the jobs it
schedules; like the rest of the loop, it reads the clock only through `clock`.
"""

import asyncio
import logging
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from sglang_tuner.config.discovery import (
    FileSD,
    TargetSpec,
    merge_targets,
    shard_targets,
    static_targets,
)
from sglang_tuner.config.settings import Settings
from sglang_tuner.loop.fleet import Fleet, fleet_changed
from sglang_tuner.loop.outputs import Outputs
from sglang_tuner.loop.schedule import Jobs, ScrapeLoops
from sglang_tuner.sources.target import TargetSource
from sglang_tuner.target_state import TargetState
from sglang_tuner.watch import Watch

logger = logging.getLogger(__name__)
Job = Callable[[], Coroutine[Any, Any, None]]


class Reconfiguring:
    """Targets matched to the configuration, and a new configuration applied (`loop.Tuner`'s)."""

    settings: Settings
    clock: Callable[[], float]
    watch: Watch
    targets: dict[str, TargetState]
    fleet: Fleet | None
    outputs: Outputs
    _file_sd: FileSD
    _jobs: Jobs | None
    _ssl: ssl.SSLContext | None
    _background: set[asyncio.Task[None]]
    _scrapers: ScrapeLoops
    _scheduled: bool
    # the loop's periodic work, which a change of settings reschedules
    fleet_round: Job
    publish_job: Job
    persist_job: Job

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- targets ---------------------------------------------------------------------------
    def _all_targets(self) -> list[TargetSpec]:
        discovered, _ = self._file_sd.refresh()
        return self._direct_targets(discovered)

    def _direct_targets(self, discovered: list[TargetSpec]) -> list[TargetSpec]:
        """This replica's share of the static and file_sd targets."""
        specs = merge_targets(static_targets(self.settings), discovered)
        return shard_targets(specs, self.settings.shard)

    def _apply_targets(self, specs: list[TargetSpec]) -> None:
        """Add, keep or remove targets (and their scrape jobs) to match `specs`."""
        wanted = {t.name: t for t in specs}
        for name in list(self.targets):
            in_fleet = self.fleet is not None and name in self.fleet.names
            if in_fleet and name in wanted:  # a configured target wins over a discovered one
                assert self.fleet is not None
                self.fleet.names.discard(name)
                self._remove_target(name)
            elif not in_fleet and (name not in wanted or wanted[name] != self.targets[name].spec):
                self._remove_target(name)
        capacity = self.watch.window_capacity()
        interval = self.settings.scrape_interval_seconds
        for name, spec in wanted.items():
            if name in self.targets:
                continue
            self.watch.add(self.watch.new_state(spec, capacity), TargetSource(spec, self._ssl))
            if self._scheduled:
                self._scrapers.add(name, interval)

    def _remove_target(self, name: str) -> None:
        source = self.watch.forget(name)
        if source is not None:
            self._spawn(source.aclose())
        self.outputs.forget(name, self.clock())
        self._scrapers.remove(name)
        logger.info("target %s removed", name)

    # -- the Prometheus source: made, scheduled, and restarted when its settings change ----
    def _new_fleet(self) -> Fleet:
        capacity = self.watch.window_capacity(self.settings.evaluation_interval_seconds)
        return Fleet(self.settings, lambda spec: self.watch.new_state(spec, capacity))

    def _schedule_rounds(self) -> None:
        """Direct mode publishes every scrape interval; with `prometheus:` each round does."""
        s, jobs = self.settings, self._jobs
        assert jobs is not None
        jobs.remove("publish")
        jobs.remove("prometheus")
        if s.prometheus is None:
            interval = s.scrape_interval_seconds
            jobs.every("publish", interval, self.publish_job, interval)
            return
        self.fleet = self._new_fleet()
        jobs.every("prometheus", s.evaluation_interval_seconds, self.fleet_round, 0.0)

    def _restart_fleet(self) -> None:
        """`prometheus:` or `shard:` changed: the discovered targets start over."""
        if self.fleet is not None:
            for name in list(self.fleet.names):
                self._remove_target(name)
            self._spawn(self.fleet.aclose())
            self.fleet = None
        if self._jobs is not None:
            self._schedule_rounds()
        elif self.settings.prometheus is not None:
            self.fleet = self._new_fleet()

    # -- a new configuration ---------------------------------------------------------------
    async def refresh_targets_job(self) -> None:
        """Re-read file_sd files and apply changes (in the event loop)."""
        discovered, changed = self._file_sd.refresh()
        if changed:
            self._apply_targets(self._direct_targets(discovered))

    def reload(self, settings: Settings) -> None:
        """Apply a new, already validated configuration (SIGHUP): targets, rules, timing (every
        target's scrape loop restarts on a new interval, windows resized), Alertmanager and the
        Prometheus source (its targets start over)."""
        old, self.settings = self.settings, settings
        self.watch.settings = settings
        self._file_sd = FileSD(settings.file_sd)
        if _timing(old) != _timing(settings):
            self._retime()
        self._spawn(self.outputs.reconfigure(settings))
        self._apply_targets(self._all_targets())
        if fleet_changed(old, settings):
            self._restart_fleet()
        logger.info("configuration reloaded: %d target(s)", len(self.targets))

    def _retime(self) -> None:
        """New scrape interval or window: resize every window, restart the periodic work."""
        interval, capacity = self.settings.scrape_interval_seconds, self.watch.window_capacity()
        fleet_capacity = self.watch.window_capacity(self.settings.evaluation_interval_seconds)
        fleet = self.fleet.names if self.fleet is not None else set()
        for name, target in self.targets.items():
            target.resize_window(fleet_capacity if name in fleet else capacity)
        self._scrapers.retime(interval)
        if self._jobs is not None:
            if self.settings.prometheus is None:
                self._jobs.every("publish", interval, self.publish_job, interval)
            if self.outputs.store is not None:
                self._jobs.every("persist", interval, self.persist_job, interval)


def _timing(settings: Settings) -> tuple[float, ...]:
    """The settings whose change restarts the scrape loops and resizes the windows."""
    spans = [settings.rules[r].window_seconds or 0.0 for r in sorted(settings.rules)]
    return (settings.scrape_interval_seconds, settings.window_seconds, *spans)
