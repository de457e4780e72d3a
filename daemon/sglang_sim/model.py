"""A whole simulated SGLang server: DP ranks, tokenizer process, crashes and restarts."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from sglang_physics import Perturbation

from .catalogue import parse_version
from .decode import LogSink
from .defaults import capture_batch_sizes, resolve_knobs
from .gpus import Gpu
from .hardware import Knobs, MemoryPlan, max_running, plan_memory
from .llms import LlmSpec
from .physics import Engine
from .scheduler import Rank
from .stats import Accumulator, TokenizerStats
from .workload import Load

STARTUP_SECONDS = 25.0  # weight loading + graph capture; /health answers 503 meanwhile
RESTART_DOWN_SECONDS = 5.0  # a requested restart: the old process exits, the new one starts
STARTUP_FAILURE_SECONDS = 12.0  # how far into startup a memory failure surfaces


@dataclass(frozen=True)
class ServerConfig:
    """Everything that defines one simulated server's behaviour."""

    knobs: Knobs = field(default_factory=Knobs)
    load: Load = field(default_factory=Load)
    gpu: Gpu = field(default_factory=Gpu)
    llm: LlmSpec = field(default_factory=LlmSpec)
    version: str = "0.5.23"
    dead_seconds: float = 20.0
    # the world's constants drawn away from sglang_physics's (restarts keep it: same hardware)
    perturbation: Perturbation = field(default_factory=Perturbation)


def build(config: ServerConfig) -> tuple[Knobs, MemoryPlan, Engine]:
    """Resolve the flags and plan memory as SGLang's startup would."""
    version = parse_version(config.version)
    knobs = resolve_knobs(config.knobs, config.gpu, version, config.llm)
    provisional = plan_memory(config.gpu, config.llm, knobs, ())
    running = max_running(provisional.max_total_num_tokens, config.llm, knobs)
    sizes = tuple(capture_batch_sizes(knobs, config.gpu, version, running))
    plan = plan_memory(config.gpu, config.llm, knobs, sizes)
    return knobs, plan, Engine(config.gpu, config.llm, knobs, sizes, config.perturbation)


class NullLog:
    """A LogSink that drops everything."""

    def emit(self, at: float, event: str, **fields: object) -> None:
        """Drop the event."""


class ServerModel:
    """Advances lazily: `advance_to(t)` runs every scheduler event up to simulated time t."""

    config: ServerConfig
    ranks: list[Rank]

    def __init__(
        self, config: ServerConfig, seed: int = 0, start: float = 0.0, log: LogSink | None = None
    ) -> None:
        self.seed = seed
        self.log: LogSink = log or NullLog()
        self.now = start
        self.restarts = 0  # crashes
        self.boots = 0
        self.configure(config, start)

    def configure(self, config: ServerConfig, at: float) -> None:
        """Replace the configuration and boot at once (a scenario switch)."""
        self._set_config(config)
        self.crash_at = self.dead_until = self.down_until = -1.0
        self._boot(at)

    def restart(self, config: ServerConfig, at: float) -> None:
        """A requested restart: down now, back after startup with `config` and fresh counters."""
        self.advance_to(at)
        self._set_config(config)
        self.crash_at, self.dead_until = at, at + RESTART_DOWN_SECONDS
        self.down_until = self.dead_until + STARTUP_SECONDS
        self.log.emit(at, "shutdown", model=self)

    def set_load(self, load: Load, at: float) -> None:
        """Change the client load live, without a restart."""
        self.advance_to(at)
        self.config = replace(self.config, load=load)
        for rank in self.ranks:
            rank.arrivals.change(load, max(rank.now, at))

    def _set_config(self, config: ServerConfig) -> None:
        self.config = config
        self.version = parse_version(config.version)
        self.knobs, self.plan, self.engine = build(config)

    def _boot(self, at: float) -> None:
        self.booted_at, self.boots = at, self.boots + 1
        self.tok, self.http = TokenizerStats(), Accumulator()
        self.ranks = [self._rank(i, at) for i in range(self.knobs.dp_size)]
        self.log.emit(at, "startup", model=self)
        if self.plan.failure:
            self._crash(at + STARTUP_FAILURE_SECONDS, self.plan.failure, {})

    def _rank(self, index: int, at: float) -> Rank:
        rng = random.Random(f"{self.seed}/{self.boots}/{index}")
        args = (self.engine, self.plan, self.version, self.config.load)
        rank = Rank(*args, rng, at, self.tok, self.log)
        rank.index = index
        return rank

    @property
    def metrics_enabled(self) -> bool:
        """False when the server runs without --enable-metrics."""
        return self.knobs.enable_metrics

    def status(self) -> str:
        """'up', 'dead' (process gone: connections refused) or 'starting' (/health 503)."""
        if self.now >= self.down_until:
            return "up"
        return "dead" if self.crash_at <= self.now < self.dead_until else "starting"

    def advance_to(self, t: float) -> None:
        """Run every scheduler event that starts at or before simulated time t."""
        while True:
            if self.now < self.down_until:
                if t < self.down_until:
                    self.now = max(self.now, t)
                    return
                self.now = self.down_until
                self._boot(self.down_until)
                continue
            rank = min(self.ranks, key=lambda r: r.next_time())
            if rank.next_time() > t:
                self.now = max(self.now, t)
                return
            rank.step()
            if rank.crashed:
                self.now = rank.now
                self._crash(rank.now, rank.crashed, rank.crash_fields)

    def _crash(self, at: float, kind: str, fields: dict[str, float]) -> None:
        self.restarts += 1
        self.crash_at, self.dead_until = at, at + self.config.dead_seconds
        self.down_until = self.dead_until + STARTUP_SECONDS
        self.log.emit(at, "crash", model=self, kind=kind, **fields)
