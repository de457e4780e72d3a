"""The Prometheus source: a whole fleet read from a Prometheus-compatible query API.

Every round sends the same fixed set of instant queries (`promql.py`: one per canonical signal,
each for every server at once), groups the answers into targets by their labels, and gives the
loop one `ScrapeResult` per target of this replica's shard, as a direct scrape would. At start,
the same queries as `query_range` fill the windows with the recent past (`history.py`; `check
--prometheus` judges the same history). A failed query fails
the round for every target (their windows stay as they were); answers with warnings (partial
responses) are used and the warnings reported per query.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from sglang_tuner.config.settings import PrometheusSettings, ShardSettings
from sglang_tuner.model.scrape import QueryStatus, ScrapeResult
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.prometheus.api import Answer, PrometheusClient
from sglang_tuner.sources.prometheus.promql import (
    LATENCY_QUERIES,
    UP,
    FleetQuery,
    PromQL,
    build_queries,
    part_name,
)
from sglang_tuner.sources.prometheus.range_history import History, columns_of, history_steps
from sglang_tuner.sources.prometheus.targets import FleetTargets, Parts

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FleetRound:
    """One round (or one step of the history read at start) for this replica's targets."""

    ts: float
    results: Mapping[str, ScrapeResult]  # one per target: a snapshot, or why there is none
    specs: Mapping[str, TargetSpec]  # every target this replica knows now
    queries: tuple[QueryStatus, ...]


class PrometheusSource:
    """Queries, target bookkeeping and per-query status for one Prometheus-compatible API."""

    def __init__(
        self,
        settings: PrometheusSettings,
        shard: ShardSettings,
        interval_seconds: float,
        client: PrometheusClient | None = None,
    ) -> None:
        self.settings = settings
        self.interval_seconds = interval_seconds
        promql = PromQL(settings.target_labels, settings.selector, settings.rate_window_seconds)
        self.queries = build_queries(promql)
        self._settings = settings
        self.client = client or PrometheusClient(settings)
        self.targets = FleetTargets(settings, shard)
        # /server_info of the fleet's servers: one small shared pool, reads are rare
        self.servers = HttpClient()
        self._status = {q.name: QueryStatus(q.name, q.expr) for q in self.queries}
        self._limit = asyncio.Semaphore(settings.max_concurrent_queries)

    @property
    def statuses(self) -> tuple[QueryStatus, ...]:
        """Every query's latest run and counts, in query order."""
        return tuple(self._status.values())

    async def round(self, now: float) -> FleetRound:
        """One round of instant queries evaluated at `now`."""
        started = time.perf_counter()
        answers = await self._ask_all(self.queries, lambda q: self.client.query(q.expr, now))
        duration = time.perf_counter() - started
        self._record(answers, now)
        failed = _first_failure(self.queries, answers)
        if failed is not None:
            reason, error = failed
            results = self.targets.fail(now, duration, reason, error)
        else:
            parts, up = self._parts(answers)
            warnings = tuple(w for a in answers for w in a.warnings)
            results = self.targets.observe(parts, up, now, duration, warnings)
        return FleetRound(now, results, dict(self.targets.specs), self.statuses)

    async def backfill(self, now: float, span_seconds: float) -> Iterator[FleetRound]:
        """The recent past as rounds, oldest first, from `query_range` (steps one interval
        apart, ending one interval before `now`); none when the history cannot be read."""
        step = self.interval_seconds
        if span_seconds - step <= 0:
            return iter(())
        past = await self.history(now - step, span_seconds - step, step)
        if past.error is not None:
            logger.warning("no history from Prometheus, windows fill from now on: %s", past.error)
            return iter(())
        return self.replay(past)

    async def history(
        self, end: float, span_seconds: float, step: float, latency_every: int = 1
    ) -> History:
        """Every query but `up` as one `query_range` over `span_seconds` up to `end` (included),
        `step` apart: the fleet's history, or why there is none (`History.error`).
        `latency_every` > 1: the latency quantiles only every that many steps (ending at `end`),
        each over as long a rate window, so no request is left out; they cost the most."""
        start, steps = history_steps(end, span_seconds, step)
        queries = [q for q in self.queries if q.name != UP]
        every = max(1, min(latency_every, steps))
        if every > 1:
            queries = [q for q in queries if q.name not in LATENCY_QUERIES]
            queries += self._latency_queries(step * every)
        started = time.perf_counter()

        def ask(query: FleetQuery) -> Awaitable[Answer]:
            stride = step * every if query.name in LATENCY_QUERIES else step
            first = end - ((end - start) // stride) * stride
            return self.client.query_range(query.expr, first, end, stride)

        answers = await self._ask_all(queries, ask)
        seconds = time.perf_counter() - started
        self._record(answers, end, queries)
        series = sum(len(a.result) for a in answers)
        failed = _first_failure(queries, answers)
        if failed is not None:
            return History(start, step, steps, {}, len(queries), series, seconds, failed[1])
        results = [a.result for a in answers]
        columns = columns_of(queries, results, self.targets.name_of, start, step, steps)
        return History(start, step, steps, columns, len(queries), series, seconds)

    def _latency_queries(self, seconds: float) -> list[FleetQuery]:
        """The latency quantile queries over a rate window of at least `seconds`."""
        s = self._settings
        window = max(s.rate_window_seconds, seconds)
        promql = PromQL(s.target_labels, s.selector, window)
        return [q for q in build_queries(promql) if q.name in LATENCY_QUERIES]

    def replay(self, past: History) -> Iterator[FleetRound]:
        """The history as rounds, oldest first: each step a snapshot of every target with
        values there (a gap is no sample, not a failure)."""
        for k in range(past.steps):
            ts = past.start + k * past.step
            results = self.targets.replay(past.at(k), ts, past.seconds)
            yield FleetRound(ts, results, dict(self.targets.specs), self.statuses)

    async def aclose(self) -> None:
        """Close the connection pools."""
        await self.client.aclose()
        await self.servers.aclose()

    async def _ask_all(
        self, queries: Sequence[FleetQuery], ask: Callable[[FleetQuery], Awaitable[Answer]]
    ) -> list[Answer]:
        async def one(query: FleetQuery) -> Answer:
            async with self._limit:
                return await ask(query)

        return list(await asyncio.gather(*(one(q) for q in queries)))

    def _record(
        self, answers: Sequence[Answer], now: float, queries: Sequence[FleetQuery] | None = None
    ) -> None:
        """Fold the answers into each query's status and counts."""
        for query, answer in zip(queries or self.queries, answers, strict=True):
            old = self._status[query.name]
            failures = dict(old.failures_total)
            reason = answer.error_reason
            if reason is not None:
                failures[reason] = failures.get(reason, 0) + 1
            if reason is not None and reason != old.error_reason:  # one line per change
                logger.warning("prometheus query %s failed: %s", query.name, answer.error)
            elif reason is None and old.error_reason is not None:
                logger.info("prometheus query %s answers again", query.name)
            self._status[query.name] = replace(
                old, ts=now, duration_seconds=answer.duration_seconds, series=len(answer.result),
                error_reason=answer.error_reason, error=answer.error, warnings=answer.warnings,
                runs_total=old.runs_total + 1, failures_total=failures,
                warnings_total=old.warnings_total + bool(answer.warnings),
            )  # fmt: skip

    def _parts(self, answers: Sequence[Answer]) -> tuple[Parts, dict[str, float]]:
        """Instant answers by target: part name -> value; and `up` of the known targets."""
        parts: Parts = {}
        up: dict[str, float] = {}
        for query, answer in zip(self.queries, answers, strict=True):
            if query.name == UP:
                for item in answer.result:
                    name = self.targets.known_name(item["metric"])
                    if name is not None:
                        up[name] = float(item["value"][1])
                continue
            for item in answer.result:
                labels = item["metric"]
                name = self.targets.name_of(labels)
                if name is not None:
                    split = labels.get(query.split_by) if query.split_by else None
                    target = parts.get(name) or parts.setdefault(name, {})
                    target[part_name(query, split)] = float(item["value"][1])
        return parts, up


def _first_failure(
    queries: Sequence[FleetQuery], answers: Sequence[Answer]
) -> tuple[str, str] | None:
    """(target failure reason, message) of the first failed query, or None."""
    for query, answer in zip(queries, answers, strict=True):
        if answer.error_reason is not None:
            reason = "query_timeout" if answer.error_reason == "timeout" else "query_failed"
            return reason, f"Prometheus query {query.name} failed: {answer.error}"
    return None
