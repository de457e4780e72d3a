"""A whole simulated SGLang server: DP ranks, tokenizer process, crashes and restarts."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .catalogue import parse_version
from .decode import LogSink
from .hardware import Gpu, Knobs, LlmSpec, MemoryPlan, plan_memory
from .scheduler import Rank
from .stats import Accumulator, TokenizerStats
from .workload import Load

STARTUP_SECONDS = 25.0  # weight loading + graph capture after a restart; /health answers 503


@dataclass(frozen=True)
class ServerConfig:
    """Everything that defines one simulated server's behaviour."""

    knobs: Knobs = field(default_factory=Knobs)
    load: Load = field(default_factory=Load)
    gpu: Gpu = field(default_factory=Gpu)
    llm: LlmSpec = field(default_factory=LlmSpec)
    version: str = "0.5.23"
    dead_seconds: float = 20.0


class NullLog:
    """A LogSink that drops everything."""

    def emit(self, at: float, event: str, **fields: object) -> None:
        """Drop the event."""


class ServerModel:
    """Advances lazily: `advance_to(t)` runs every scheduler event up to simulated time t."""

    def __init__(
        self, config: ServerConfig, seed: int = 0, start: float = 0.0, log: LogSink | None = None
    ) -> None:
        self.seed = seed
        self.log: LogSink = log or NullLog()
        self.now = start
        self.restarts = 0
        self.http = Accumulator()
        self.configure(config, start)

    def configure(self, config: ServerConfig, at: float) -> None:
        """(Re)start the server with a new configuration at simulated time `at`."""
        self.config = config
        self.version = parse_version(config.version)
        self.plan: MemoryPlan = plan_memory(config.gpu, config.llm, config.knobs)
        self.down_until = -1.0
        self.crashed_at = -1.0
        self._boot(at)

    def _boot(self, at: float) -> None:
        cfg = self.config
        self.booted_at = at
        self.tok = TokenizerStats()
        hw = (cfg.gpu, cfg.llm, cfg.knobs, self.plan)
        lpm_fallback = self.version >= (0, 5, 0)
        self.ranks = [
            Rank(
                hw,
                cfg.load,
                lpm_fallback,
                random.Random(f"{self.seed}/{self.restarts}/{i}"),
                at,
                self.tok,
                self.log,
            )
            for i in range(cfg.knobs.dp_size)
        ]
        for index, rank in enumerate(self.ranks):
            rank.index = index
        self.log.emit(at, "startup", model=self)

    @property
    def metrics_enabled(self) -> bool:
        """False when the server runs without --enable-metrics."""
        return self.config.knobs.enable_metrics

    def status(self) -> str:
        """'up', 'dead' (process gone) or 'starting' (loading; /health answers 503)."""
        if self.now >= self.down_until:
            return "up"
        return "dead" if self.now < self.crashed_at + self.config.dead_seconds else "starting"

    def advance_to(self, t: float) -> None:
        """Run every scheduler event that starts at or before simulated time t."""
        while True:
            if self.now < self.down_until:
                if t < self.down_until:
                    self.now = max(self.now, t)
                    return
                self.now = self.down_until
                self._boot(self.down_until)
            rank = min(self.ranks, key=lambda r: r.next_time())
            if rank.next_time() > t:
                self.now = max(self.now, t)
                return
            rank.step()
            if rank.crashed:
                self._crash(rank.now)

    def _crash(self, at: float) -> None:
        self.restarts += 1
        self.crashed_at = self.now = at
        self.down_until = at + self.config.dead_seconds + STARTUP_SECONDS
        self.log.emit(at, "crash", model=self)
