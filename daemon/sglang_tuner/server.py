"""Run the daemon: the tuner loop and the HTTP API (uvicorn) in one asyncio loop."""

import asyncio
import logging
import resource
import signal
from collections.abc import Callable
from contextlib import suppress

import uvicorn
from prometheus_client import CollectorRegistry

from .api import create_app
from .config import ConfigError, Settings
from .evaluation import TunerState
from .exporter import TunerCollector
from .loop import Tuner
from .rules import ALL_RULES
from .store import Store

logger = logging.getLogger(__name__)


def build(settings: Settings, *, with_store: bool = True) -> tuple[Tuner, uvicorn.Server]:
    """Wire state, tuner, collector, API and uvicorn for `settings`."""
    state = TunerState()
    store = Store(settings.database) if with_store else None
    tuner = Tuner(settings, ALL_RULES, state, store)
    registry = CollectorRegistry()
    registry.register(TunerCollector(state.latest, ALL_RULES))
    app = create_app(state, registry, rules=ALL_RULES, settings=settings)
    config = uvicorn.Config(
        app,
        host=settings.listen_host,
        port=settings.listen_port,
        log_config=None,  # keep our logging setup
        access_log=False,
        lifespan="off",
    )
    return tuner, uvicorn.Server(config)


def raise_open_files_limit() -> None:
    """One socket per target: lift the soft file-descriptor limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(settings: Settings, reload: Callable[[], Settings] | None = None) -> None:
    """Run until SIGINT/SIGTERM; SIGHUP re-reads the config and keeps the old one if invalid."""
    raise_open_files_limit()
    tuner, server = build(settings)
    await tuner.start()
    if reload is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, _reloader(tuner, reload))
    logger.info(
        "sglang-tuner listening on http://%s:%d (%d target(s))",
        settings.listen_host,
        settings.listen_port,
        len(tuner.targets),
    )
    try:
        await server.serve()
    finally:
        with suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        await tuner.stop()


def _reloader(tuner: Tuner, reload: Callable[[], Settings]) -> Callable[[], None]:
    def on_sighup() -> None:
        try:
            tuner.reload(reload())
        except ConfigError as exc:
            logger.error("reload failed, keeping the running configuration:\n%s", exc)
        except OSError as exc:
            logger.error("reload failed, keeping the running configuration: %s", exc)

    return on_sighup
