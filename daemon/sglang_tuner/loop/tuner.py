"""The loop: runs the periodic work and moves data one step right through the flow.

sources (scrape, log, /server_info, DCGM) -> the watched server (`observe`, `read_config`: its
state, then its review when due) -> `Outputs` (alert state, publish, Alertmanager, the store).
The loop and `Outputs` own every I/O call; only they (and the CLI) read the clock, everything
they call takes `now`. The servers are the watch's (`watch.servers`); the loop keeps only their
sources.

With `prometheus:` configured, a round of queries every evaluation interval reads the whole
fleet instead (its targets are discovered, not scraped); each round ends with a publish. Which
targets are watched follows the configuration (the static ones and file_sd's, this replica's
share; the Prometheus source's own), and a new configuration (SIGHUP) adds, keeps or removes
targets, restarts the Prometheus source, retimes the scrape loops and resizes the windows.
"""

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import httpx

from sglang_tuner.config.discovery import (
    FileSD,
    merge_targets,
    shard_targets,
    static_targets,
)
from sglang_tuner.config.settings import Settings
from sglang_tuner.evaluation import TunerState
from sglang_tuner.loop.backfill import fill_from_history, judge_history, review_all
from sglang_tuner.loop.fleet import Fleet, fleet_changed
from sglang_tuner.loop.outputs import Outputs
from sglang_tuner.loop.schedule import Jobs, ScrapeLoops
from sglang_tuner.loop.server_reads import SERVER_INFO_JOB_SECONDS, Source, read_due
from sglang_tuner.loop.transitions import TransitionLog
from sglang_tuner.model.scrape import ScrapeResult
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.rule import Rule
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.sources.gateway import GatewaySource, GatewayWorkerSource
from sglang_tuner.sources.prometheus.range_history import History
from sglang_tuner.sources.target import TargetSource
from sglang_tuner.store.database import Store
from sglang_tuner.target_state import TargetState
from sglang_tuner.watch import Watch

logger = logging.getLogger(__name__)
Job = Callable[[], Coroutine[Any, Any, None]]


class Tuner:
    """Runs the daemon's periodic work inside an asyncio loop."""

    def __init__(
        self,
        settings: Settings,
        rules: Sequence[Rule] = ALL_RULES,
        state: TunerState | None = None,
        store: Store | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.state = state or TunerState()
        self.clock = clock
        self.watch = w = Watch(settings, rules)
        self.sources: dict[str, Source] = {}  # per target: its open connections, log, DCGM
        self.gateways: dict[str, GatewaySource] = {}  # Model Gateways: a target per worker
        self.fleet: Fleet | None = None  # with `prometheus:` configured
        self._round: asyncio.Task[Any] | None = None  # the fleet round in progress
        self.outputs = Outputs(settings, self.state, store)
        self._file_sd = FileSD(settings.file_sd)
        self._jobs: Jobs | None = None
        self._ssl: ssl.SSLContext | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._started = asyncio.Event()  # scrape loops wait for the state to be restored
        self.transitions = TransitionLog()
        next_in = lambda name, interval: w.next_scrape_in(name, interval, self.clock())  # noqa: E731
        self._scrapers = ScrapeLoops(self.scrape, self._started, next_in)
        self._scheduled = True  # False: a driver with its own clock calls `tick`

    async def start(self, scheduled: bool = True) -> None:
        """Load targets, restore state and start the periodic jobs and the Alertmanager sender.
        `scheduled=False`: no jobs; whoever owns the clock calls `tick` (benchmarks, tests)."""
        self._ssl = httpx.create_ssl_context()  # built once: it is costly, and shared
        self._scheduled = scheduled
        self._apply_targets(self._all_targets())
        self.outputs.restore(self._states(), self.clock())
        await self.outputs.start()
        if scheduled:
            # what was restored shows at once (the targets, their windows and alert state),
            # not a scrape interval later
            self.publish()
            self._start_jobs()
        elif self.settings.prometheus is not None:
            self.fleet = self._new_fleet()
        self._started.set()

    async def tick(self) -> None:
        """One round at `clock()`, for a driver with its own clock: /server_info where due,
        every target scraped (and judged when due), one publication."""
        await self.refresh_server_info()
        if self.fleet is not None:
            await self.fleet_round()
        names = [*self.watch.servers, *self.gateways]
        await asyncio.gather(*(self.scrape(name) for name in names))
        self.publish()

    def _start_jobs(self) -> None:
        self._jobs = jobs = Jobs(self.clock)
        s = self.settings
        self._schedule_rounds()
        jobs.every("server_info", SERVER_INFO_JOB_SECONDS, self.refresh_server_info, 0.5)
        if s.file_sd:
            sd_interval = min(f.refresh_interval_seconds for f in s.file_sd)
            jobs.every("file_sd", sd_interval, self.refresh_targets_job, sd_interval)
        if self.outputs.store is not None:
            # Every scrape interval: a kill loses at most one interval of state.
            every = s.scrape_interval_seconds
            jobs.every("persist", every, self.persist_job, every)
        jobs.start()

    async def stop(self) -> None:
        """Stop the jobs, persist, deliver queued alerts for a moment, close connections."""
        if self._jobs is not None:
            await self._jobs.shutdown()
        # a round must not outlive the connections it uses (unless it is the caller: a round
        # awaited directly, then stopped; cancelling itself hangs on Python 3.10)
        if self._round is not None and self._round is not asyncio.current_task():
            self._round.cancel()
            await asyncio.gather(self._round, return_exceptions=True)
        await self._scrapers.stop()
        self.persist()  # first: a stop cut short while alerts drain still keeps the state
        await self.outputs.stop()
        await asyncio.gather(*self._background, *(s.aclose() for s in self.sources.values()))
        await asyncio.gather(*(gateway.aclose() for gateway in self.gateways.values()))
        if self.fleet is not None:
            await self.fleet.aclose()

    # -- the Prometheus source: rounds of queries for the whole fleet -----------------------
    async def fleet_round(self) -> None:
        """One round (after the history, once): every target's result ingested and judged,
        then a publish."""
        fleet, now = self.fleet, self.clock()
        if fleet is None:
            return
        self._round = asyncio.current_task()
        apply = functools.partial(
            fleet.apply, watch=self.watch, sources=self.sources, remove=self._remove_target,
            restore=lambda new: self.outputs.restore(new, now, fleet.stores_windows),
            log=lambda target, result: self.transitions.record(target, result, now),
        )  # fmt: skip
        try:
            # what the rules need at once, and alert state over the last `for` (history.py);
            # the verification's longer window fills as it runs
            rebuilt = await fill_from_history(self.watch, fleet, apply, now)
            if rebuilt is not None:
                self.outputs.take_over(*rebuilt)
            apply(await fleet.source.round(now))
            await review_all(self.watch, list(fleet.names), now)
        except asyncio.CancelledError:
            return  # shutting down
        if self._scheduled:
            self.publish()

    # -- sources -> target state -> judge ---------------------------------------------------
    async def scrape(self, name: str) -> None:
        """Scrape one target (a job; one slow target never delays another's job)."""
        if name in self.gateways:
            return await self.scrape_gateway(self.gateways[name])
        server, source = self.watch.servers.get(name), self.sources.get(name)
        if server is None or not isinstance(source, TargetSource):
            return
        if isinstance(source, GatewayWorkerSource):
            return  # its metrics come with its gateway's page
        s = self.settings
        try:
            result = await source.scrape(
                self.clock(), s.scrape_timeout_seconds, s.max_body_bytes, s.scrape_limits
            )
            log_values = await source.poll_log(result.ts, s.scrape_timeout_seconds)
        except asyncio.CancelledError:
            return  # shutting down: a scrape cut short is not an error worth a traceback
        self._ingest(name, source, result, log_values)

    def _ingest(
        self, name: str, source: TargetSource, result: ScrapeResult, log_values: dict[str, float]
    ) -> None:
        """A scrape's result (and the log since) to its server; reviewed when due."""
        server = self.watch.servers.get(name)
        if server is None:
            return  # removed (a reload, its gateway's page) while it was being scraped
        self.transitions.record(server.state, result, result.ts)
        server.state.note_crashes(source.log_crashes())  # the crashes in words, beside them
        server.observe(result, log_values, self.clock())

    async def scrape_gateway(self, gateway: GatewaySource) -> None:
        """One `/engine_metrics` scrape: the gateway's targets follow the workers it lists."""
        s = self.settings
        try:
            results = await gateway.scrape(
                self.clock(), s.scrape_timeout_seconds, s.max_body_bytes, s.scrape_limits
            )
        except asyncio.CancelledError:
            return
        for name in gateway.gone & self.watch.servers.keys():
            self._remove_target(name)
        for name, result in results.items():
            if name not in self.watch.servers:
                spec = gateway.spec_of(name)
                server = self.watch.new_server(spec)
                self.outputs.restore({name: server.state}, result.ts)  # what the store kept
                self.watch.add(server)
                self.sources[name] = GatewayWorkerSource(spec, self._ssl)
            source = self.sources[name]
            if isinstance(source, TargetSource):  # a worker: no log of its own
                self._ingest(name, source, result, {})

    async def judge_history(self, end: float, span_seconds: float, latency_every: int) -> History:
        """`check --prometheus`: the fleet's history up to `end` ingested, every target reviewed
        at `end`, and the result published (a `for` of 0: what holds fires)."""
        fleet = self.fleet
        assert fleet is not None
        apply = functools.partial(
            fleet.apply, watch=self.watch, sources=self.sources, remove=lambda _name: None,
            restore=lambda _new: None, log=lambda _target, _result: None,
        )  # fmt: skip
        past = await judge_history(self.watch, fleet, apply, end, span_seconds, latency_every)
        self.publish()
        return past

    async def refresh_server_info(self) -> None:
        """Read `/server_info` (and DCGM) where due: at start, after restarts, and periodically."""
        s = self.settings
        await read_due(
            self.watch.servers, self.sources, self.clock(),
            s.server_info_interval_seconds, s.scrape_timeout_seconds,
        )  # fmt: skip

    # -- alert state -> publish -> outputs --------------------------------------------------
    async def publish_job(self) -> None:
        """`publish` as a coroutine job: it runs in the event loop, never in a worker thread."""
        self.publish()

    def publish(self, refresh: bool = False) -> None:
        """Judge targets never judged (`refresh`: all of them), then publish an evaluation."""
        now, servers = self.clock(), self.watch.servers
        self.transitions.flush(now)
        for server in servers.values():
            if refresh or server.judgement is None:
                server.review(now)
        queries = self.fleet.queries if self.fleet is not None else ()
        tasks = self._scrapers.failures()
        logs = {n: s.log for n, s in self.sources.items()
                if isinstance(s, TargetSource) and s.log is not None}  # fmt: skip
        self.outputs.publish(servers, self.watch.rule_failures, now, queries, tasks, logs)

    # -- persistence -----------------------------------------------------------------------
    async def persist_job(self) -> None:
        """`persist` without waiting: the save runs in the store's thread, and one still
        running when the next is due makes that one skipped (a frozen disk stops no scrape)."""
        self.persist(wait=False)

    def persist(self, wait: bool = True) -> None:
        """Write windows, alert state and new advice transitions to SQLite (`wait`: for the
        save to end, as at stop)."""
        fleet = self.fleet
        refilled = fleet.names if fleet is not None and not fleet.stores_windows else ()
        self.outputs.persist(self.watch.servers, self.clock(), refilled, wait)

    def _states(self) -> dict[str, TargetState]:
        return {name: server.state for name, server in self.watch.servers.items()}

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
        wanted = {t.name: t for t in specs if not t.gateway}
        wanted |= self._apply_gateways({t.name: t for t in specs if t.gateway})
        servers = self.watch.servers
        for name in list(servers):
            in_fleet = self.fleet is not None and name in self.fleet.names
            if in_fleet and name in wanted:  # a configured target wins over a discovered one
                assert self.fleet is not None
                self.fleet.names.discard(name)
                self._remove_target(name)
            elif not in_fleet and (name not in wanted or wanted[name] != servers[name].state.spec):
                self._remove_target(name)
        interval = self.settings.scrape_interval_seconds
        for name, spec in wanted.items():
            if name in servers:
                continue
            self.watch.add(self.watch.new_server(spec))
            self.sources[name] = TargetSource(spec, self._ssl)
            if self._scheduled:
                self._scrapers.add(name, interval)

    def _apply_gateways(self, gateways: dict[str, TargetSpec]) -> dict[str, TargetSpec]:
        """Add, keep or remove gateways (and their scrape jobs) to match `gateways`; the targets
        the kept ones found."""
        for name in [n for n, g in self.gateways.items() if gateways.get(n) != g.spec]:
            self._scrapers.remove(name)
            self._spawn(self.gateways.pop(name).aclose())
        for name, spec in gateways.items():
            if name not in self.gateways:
                self.gateways[name] = GatewaySource(spec, self._ssl)
                if self._scheduled:
                    self._scrapers.add(name, self.settings.scrape_interval_seconds)
        return {n: g.spec_of(n) for g in self.gateways.values() for n in g.names}

    def _remove_target(self, name: str) -> None:
        self.watch.forget(name)
        source = self.sources.pop(name, None)
        if source is not None:
            self._spawn(source.aclose())
        self.outputs.forget(name, self.clock())
        self._scrapers.remove(name)
        logger.info("target %s removed", name, extra={"target": name})

    # -- the Prometheus source: made, scheduled, and restarted when its settings change ----
    def _new_fleet(self) -> Fleet:
        return Fleet(self.settings)

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
        self.watch.configure(settings)
        self._file_sd = FileSD(settings.file_sd)
        if _timing(old) != _timing(settings):
            self._retime()
        self._spawn(self.outputs.reconfigure(settings))
        self._apply_targets(self._all_targets())
        if fleet_changed(old, settings):
            self._restart_fleet()
        logger.info("configuration reloaded: %d target(s)", len(self.watch.servers))

    def _retime(self) -> None:
        """New scrape interval or window: resize every window, restart the periodic work."""
        interval = self.settings.scrape_interval_seconds
        self.watch.resize()
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
