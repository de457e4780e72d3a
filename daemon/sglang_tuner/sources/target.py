"""One SGLang server's sources: its HTTP connection pool, page mapper, log file and DCGM exporter.

The loop owns one `TargetSource` per target and calls it for every read; the results go to the
target state. Failures are returned as values, never raised, and never carry the password of a
`user:password@` URL.
"""

import dataclasses
import ssl

from sglang_tuner.model.crash_report import CrashReport
from sglang_tuner.model.scrape import ScrapeLimits, ScrapeResult
from sglang_tuner.model.secrets import redact_url_secrets
from sglang_tuner.model.server_config import ServerConfig
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.dcgm import fetch_dcgm
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.log.command import LogCommand, PipeFollower, stdin_follower
from sglang_tuner.sources.log.follow import LogFollower
from sglang_tuner.sources.log.poll_thread import PollThread
from sglang_tuner.sources.scrape import scrape_metrics
from sglang_tuner.sources.server_info import fetch_server_info
from sglang_tuner.sources.sglang import SignalMapper

DEFAULT_LIMITS = ScrapeLimits()


def log_source(spec: TargetSpec) -> LogFollower | PipeFollower | None:
    """Where the target's log comes from: a command, standard input, a file, or nowhere."""
    if spec.log_command:
        return LogCommand(spec.log_command)
    if spec.log_file is not None and str(spec.log_file) == "-":
        return stdin_follower()
    return LogFollower(spec.log_file) if spec.log_file else None


def own_limits(spec: TargetSpec, limits: ScrapeLimits) -> ScrapeLimits:
    """A target's scrape limits: its own (`limits:` in its config) over `limits`, the global."""
    return dataclasses.replace(limits, **spec.limits) if spec.limits else limits


class TargetSource:
    """The I/O handles of one target; `aclose` releases them."""

    def __init__(self, spec: TargetSpec, ssl_context: ssl.SSLContext | None = None) -> None:
        self.spec = spec
        self.mapper = SignalMapper()  # counter state for rates: one per target
        found = log_source(spec)
        self.log = None if found is None else PollThread(found, spec.name)  # off the loop
        # a few kept-alive connections, closed with it; the target's own TLS when it has one
        self.client = HttpClient(ssl_context, tls=spec.tls)
        self.server_info_ts = 0.0  # when /server_info was last asked for

    async def scrape(
        self,
        now: float,
        timeout_seconds: float,
        max_body_bytes: int,
        limits: ScrapeLimits = DEFAULT_LIMITS,
    ) -> ScrapeResult:
        """One `/metrics` scrape; the target's own limits win over `limits` (the global ones)."""
        limits = own_limits(self.spec, limits)
        result = await scrape_metrics(
            self.client, self.spec.name, self.spec.url, self.mapper, now,
            timeout_seconds=timeout_seconds, max_body_bytes=max_body_bytes, limits=limits,
            token=self.spec.token,
        )  # fmt: skip
        if result.error is None:
            return result
        return dataclasses.replace(result, error=redact_url_secrets(result.error))

    async def poll_log(self, now: float, wait_seconds: float = 3.0) -> dict[str, float]:
        """What the log said since the previous poll ({} without a log file), read in the log's
        own thread: {} too while that takes longer than `wait_seconds` (a frozen disk)."""
        return await self.log.poll(now, wait_seconds) if self.log is not None else {}

    async def server_info(self, timeout_seconds: float) -> tuple[ServerConfig | None, str | None]:
        """`/server_info` (or `/get_server_info`): (config, None) or (None, error)."""
        config, error = await fetch_server_info(
            self.client, self.spec.url, token=self.spec.token, timeout_seconds=timeout_seconds
        )
        return config, None if error is None else redact_url_secrets(error)

    def log_crashes(self) -> tuple[CrashReport, ...]:
        """The crashes the latest `poll_log` read, said in words (() without a log)."""
        return self.log.crashes if self.log is not None else ()

    def launched(self) -> ServerConfig | None:
        """The flags the latest process was started with, from its log (None without one)."""
        return self.log.launched if self.log is not None else None

    async def dcgm(self, timeout_seconds: float) -> dict[str, float | str]:
        """The DCGM exporter's facts ({} without one or when it cannot be read)."""
        if not self.spec.dcgm_url:
            return {}
        return await fetch_dcgm(self.client, self.spec.dcgm_url, timeout_seconds=timeout_seconds)

    async def aclose(self) -> None:
        """Close the connection pool and the log file."""
        await self.client.aclose()
        if self.log is not None:
            self.log.close()
