"""The loop's reads of each server's `/server_info` (and DCGM exporter): at start, after a
restart, and every `server_info_interval_seconds`; what they find goes into the target state.

The loop calls `read_due` with the clock's `now`; this module does no scheduling.
"""

import asyncio
import logging
from collections.abc import Mapping

from sglang_tuner.changes.record import FLAGS
from sglang_tuner.model.server_config import ServerConfig, merge_config
from sglang_tuner.server import WatchedServer
from sglang_tuner.sources.prometheus.targets import FleetTargetSource
from sglang_tuner.sources.target import TargetSource
from sglang_tuner.target_state import TargetState, flags_changed

logger = logging.getLogger(__name__)
Source = TargetSource | FleetTargetSource
# At start every target is due at once: a few at a time keeps that burst from starving scrapes.
CONCURRENT_READS = 16
# The /server_info job's period; a target whose /server_info fails is asked again after 1, 3,
# 7, ... periods, at most every `server_info_interval_seconds`, and not while it refuses
# connections.
SERVER_INFO_JOB_SECONDS = 5.0


async def read_due(
    servers: Mapping[str, WatchedServer],
    sources: Mapping[str, Source],
    now: float,
    period_seconds: float,
    timeout_seconds: float,
) -> None:
    """Read `/server_info` (and DCGM) of every target due, `CONCURRENT_READS` at a time."""
    due = [n for n, s in servers.items() if _due(s.state, sources[n], now, period_seconds)]
    limit = asyncio.Semaphore(CONCURRENT_READS)

    async def read(name: str) -> None:
        source = sources[name]
        source.server_info_ts = now
        async with limit:
            config, error = await source.server_info(timeout_seconds)
            facts = await source.dcgm(timeout_seconds)
        server = servers.get(name)
        if server is None:
            return  # removed while we waited
        if source.spec.dcgm_url:
            server.read_dcgm(facts)
        if config is None:
            config, error = launch_stand_in(server.state, source.launched(), error)
        change = server.read_config(config, error)
        if change is not None and change.kind == FLAGS:
            moved = ", ".join(f"{f} {change.before[f]} -> {v}" for f, v in change.after.items())
            by = f" (asked by {change.rule})" if change.rule else ""
            fields = {"target": name}
            logger.info("target %s restarted with new flags: %s%s", name, moved, by, extra=fields)

    try:
        await asyncio.gather(*(read(n) for n in due))
    except asyncio.CancelledError:
        return  # shutting down


def launch_stand_in(
    target: TargetState, launched: ServerConfig | None, error: str | None
) -> tuple[ServerConfig | None, str | None]:
    """For a server whose `/server_info` fails (one that crashes before it answers): the flags
    its log says the latest process started with, over what `/server_info` said last, when they
    differ from what the daemon holds; else nothing new (None and the error)."""
    if launched is None:
        return None, error
    held = target.config
    merged = launched if held is None else merge_config(held, launched)
    if held is not None and not flags_changed(held, merged):
        return None, error
    return merged, f"{error}; flags from the log's launch line" if error else None


def _due(target: TargetState, source: Source, now: float, period: float) -> bool:
    if not source.spec.url:  # a fleet target of unknown URL: say why once, never ask
        return source.server_info_ts == 0.0
    if target.unreachable_since is not None:
        return False  # /metrics is refused: so is /server_info, asked once it answers
    waited = now - source.server_info_ts + SERVER_INFO_JOB_SECONDS / 2  # the job's jitter
    if not target.needs_server_info:
        return waited >= period
    backoff = SERVER_INFO_JOB_SECONDS * ((1 << min(target.server_info_failures, 16)) - 1)
    return waited >= min(period, backoff)
