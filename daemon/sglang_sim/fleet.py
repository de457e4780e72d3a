"""SimFleet: many simulated servers in one event loop, in the caller's loop or on a thread."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from types import TracebackType
from typing import Any

from sglang_physics import Perturbation

from .catalogue import VERSIONS
from .flags import apply_flags, apply_load
from .gpus import gpu_named
from .hardware import Knobs
from .http import SimServer
from .llms import llm_named
from .logs import LogWriter
from .model import RESTART_DOWN_SECONDS, STARTUP_SECONDS, ServerConfig, ServerModel
from .scenarios import SCENARIOS

Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ServerSpec:
    """One simulated server to run: scenario, SGLang version, port (0 = any free one)."""

    scenario: str
    version: str = "0.5.23"
    port: int = 0
    api_key: str | None = None
    log_file: str | None = None
    name: str | None = None
    flags: Pairs = ()  # (flag or Knobs field, value) applied over the scenario's flags
    load: Pairs = ()  # (Load field, value) applied over the scenario's load
    gpu: str | None = None  # a GPUS key, e.g. H200, H20, RTX4090 (default: the scenario's H100)
    model: str | None = None  # an LLMS key, e.g. qwen3-30b-a3b, deepseek-v3 (default: 8B)
    perturbation: Perturbation | None = None  # the world's constants (None: sglang_physics's)
    defaults: bool = False  # drop the scenario's flags: every knob at the version's own default


def check_spec(spec: ServerSpec) -> None:
    """Raise ValueError naming the bad scenario, version, flag or load field."""
    if spec.scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {spec.scenario!r}; try --list")
    if spec.version not in VERSIONS:
        raise ValueError(f"unknown version {spec.version!r}; choose from {', '.join(VERSIONS)}")
    config_for(spec)


def config_for(spec: ServerSpec) -> ServerConfig:
    """The scenario's configuration with the spec's version, hardware, flags and load."""
    config = SCENARIOS[spec.scenario].for_version(spec.version)
    if spec.defaults:
        config = replace(config, knobs=Knobs())
    if spec.gpu:
        config = replace(config, gpu=gpu_named(spec.gpu))
    if spec.model:
        config = replace(config, llm=llm_named(spec.model))
    if spec.perturbation is not None:
        config = replace(config, perturbation=spec.perturbation)
    config = apply_flags(config, dict(spec.flags))
    return replace(config, load=apply_load(config.load, dict(spec.load)))


def tune_gc() -> None:
    """For a process that serves many servers: stop full GC passes from stalling every scrape.

    A thousand servers hold about a million live request objects; CPython's automatic full
    collections then pause the event loop for ~200 ms. Young generations still collect cycles.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1_000)


class SimFleet:
    """Runs simulated servers; simulated time = warm-up + wall time since start x speed.

    `warmup_seconds` of simulated time run before the ports open, so the servers answer in
    their steady state from the first scrape (a busy server's KV pool takes ~a minute to fill).
    """

    def __init__(
        self,
        specs: list[ServerSpec],
        host: str = "127.0.0.1",
        speed: float = 1.0,
        seed: int = 0,
        warmup_seconds: float = 0.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        for spec in specs:
            check_spec(spec)
        self.specs, self.host, self.speed, self.seed = list(specs), host, speed, seed
        self.warmup_seconds = warmup_seconds
        self.clock = clock  # simulated seconds from the caller (a driver with its own clock)
        self.servers: list[SimServer] = []
        self.logs: list[LogWriter] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = 0.0

    @property
    def urls(self) -> list[str]:
        """Base URLs of the servers, in spec order."""
        return [f"http://{self.host}:{server.port}" for server in self.servers]

    def sim_time(self) -> float:
        """Current simulated time in seconds."""
        if self.clock is not None:
            return self.warmup_seconds + self.clock()
        return self.warmup_seconds + (time.monotonic() - self._started) * self.speed

    async def start(self) -> None:
        """Create the models and bind every port, in the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._started = time.monotonic()
        epoch = time.time() - self.warmup_seconds  # log times read as if started earlier
        for index, spec in enumerate(self.specs):
            config = config_for(spec)
            log = (
                LogWriter(
                    spec.log_file, spec.version, epoch, config.knobs.tp_size, config.knobs.dp_size
                )
                if spec.log_file
                else None
            )
            if log:
                self.logs.append(log)
            model = ServerModel(config, seed=self.seed * 100003 + index, log=log)
            model.advance_to(self.warmup_seconds)
            server = SimServer(model, self.sim_time, spec.api_key, spec.scenario, self._control)
            await server.start(self.host, spec.port)
            self.servers.append(server)

    async def stop(self) -> None:
        """Close every port and log file."""
        for server in self.servers:
            await server.stop()
        for log in self.logs:
            log.close()

    def _control(self, server: SimServer, action: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST /_sim/<action>: scenario, restart or load; ValueError becomes a 400."""
        if action == "scenario":
            error = self._switch(server, str(body.get("scenario", "")))
            if error:
                raise ValueError(error)
            return {"scenario": server.scenario}
        model, now = server.model, self.sim_time()
        if action == "restart":
            flags = body.get("flags", {})
            if not isinstance(flags, Mapping):
                raise ValueError('body must be {"flags": {"--flag": "value", ...}}')
            config = apply_flags(model.config, {str(k): str(v) for k, v in flags.items()})
            model.restart(config, now)
            return {
                "status": "restarting",
                "down_seconds": RESTART_DOWN_SECONDS + STARTUP_SECONDS,
                "knobs": asdict(config.knobs),
            }
        if action == "load":
            load = apply_load(model.config.load, body)
            model.set_load(load, now)
            return {"load": asdict(load)}
        raise ValueError(f"unknown simulator action {action!r}")

    def _switch(self, server: SimServer, scenario: str) -> str | None:
        if scenario not in SCENARIOS:
            return f"unknown scenario {scenario!r}"
        server.model.advance_to(self.sim_time())
        config = SCENARIOS[scenario].for_version(server.model.config.version)
        server.model.configure(config, server.model.now)
        server.scenario = scenario
        return None

    def _index(self, index_or_url: int | str) -> int:
        if isinstance(index_or_url, int):
            return index_or_url
        return self.urls.index(index_or_url.rstrip("/"))

    def set_scenario(self, index_or_url: int | str, scenario: str) -> None:
        """Switch one server to another scenario at once (new flags, fresh counters)."""
        self._call(index_or_url, "scenario", {"scenario": scenario})

    def restart(self, index_or_url: int | str, flags: Mapping[str, str]) -> dict[str, Any]:
        """Restart one server with flags changed, as POST /_sim/restart does."""
        return self._call(index_or_url, "restart", {"flags": dict(flags)})

    def set_load(self, index_or_url: int | str, **fields: object) -> dict[str, Any]:
        """Change one server's load live, as POST /_sim/load does."""
        return self._call(index_or_url, "load", fields)

    def _call(self, index_or_url: int | str, action: str, body: dict[str, Any]) -> dict[str, Any]:
        server = self.servers[self._index(index_or_url)]
        if self._thread is None or self._loop is None:
            return self._control(server, action, body)
        future = asyncio.run_coroutine_threadsafe(
            self._async_control(server, action, body), self._loop
        )
        return future.result(timeout=10)

    async def _async_control(
        self, server: SimServer, action: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        return self._control(server, action, body)

    def __enter__(self) -> SimFleet:
        ready = threading.Event()
        errors: list[BaseException] = []
        self._thread = threading.Thread(
            target=self._run, args=(ready, errors), daemon=True, name="sglang-sim"
        )
        self._thread.start()
        ready.wait()
        if errors:
            raise errors[0]
        return self

    def _run(self, ready: threading.Event, errors: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        self._stop_event = asyncio.Event()

        async def main() -> None:
            try:
                await self.start()
            except BaseException as exc:  # surfaced to the caller of __enter__
                errors.append(exc)
                ready.set()
                return
            ready.set()
            await self._stop_event.wait()
            await self.stop()

        loop.run_until_complete(main())
        loop.close()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
            self._thread.join(timeout=10)
            self._thread = None
