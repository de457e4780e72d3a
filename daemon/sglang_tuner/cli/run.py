"""Run the daemon: the tuner loop and the HTTP API (uvicorn) in one asyncio loop."""

import asyncio
import ctypes
import gc
import logging
import resource
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable, Collection
from contextlib import suppress

import uvicorn
from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp

from sglang_tuner.api.app import create_app
from sglang_tuner.config.settings import ConfigError, Settings, external_url
from sglang_tuner.evaluation import Evaluation, TunerState
from sglang_tuner.exporter.collector import TunerCollector
from sglang_tuner.loop.tuner import Tuner
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.store.database import Store
from sglang_tuner.web.auth import WebGuard
from sglang_tuner.web.config import WebConfig, WebConfigError, load_web_config
from sglang_tuner.web.tls import ServerTLS

logger = logging.getLogger(__name__)


class WebFront:
    """A web config at work: `guard` before every endpoint, `tls` on the API's socket."""

    def __init__(self, app: ASGIApp, web: WebConfig, open_paths: Collection[str]) -> None:
        self.guard = WebGuard(app, web, open_paths)
        self.tls = ServerTLS(web.tls, web.context) if web.tls and web.context else None
        if web.users and self.tls is None:
            logger.warning("web config %s: basic auth without TLS: passwords go in clear", web.path)

    def ssl_context(self, *_: object) -> ssl.SSLContext:
        """The listening SSLContext (uvicorn's ssl_context_factory)."""
        assert self.tls is not None
        return self.tls.listening

    def check_reload(self, web: WebConfig) -> None:
        """WebConfigError if `web` cannot be applied without a restart."""
        if (web.tls is None) != (self.tls is None):
            what = f"web config file {web.path}" if web.path else "web_config_file removed"
            raise WebConfigError(f"{what}: turning TLS on or off needs a restart")

    def apply(self, web: WebConfig, open_paths: Collection[str]) -> None:
        """Serve with a reloaded web config from the next request; run it on the API's loop."""
        self.guard.update(web, open_paths)
        if self.tls is not None and web.tls is not None and web.context is not None:
            self.tls.install(web.tls, web.context)
        if web.path is not None:
            on = "on" if self.tls else "off"
            logger.info("web config %s applied: TLS %s, %d user(s)", web.path, on, len(web.users))


def build(
    settings: Settings, web: WebConfig | None = None, *, with_store: bool = True
) -> tuple[Tuner, uvicorn.Server, WebFront]:
    """Wire state, tuner, collector, API and uvicorn for `settings`, behind `web`."""
    state = TunerState()
    store = Store(settings.database) if with_store else None
    tuner = Tuner(settings, ALL_RULES, state, store)
    registry = CollectorRegistry()
    registry.register(TunerCollector(state.latest, ALL_RULES, external_url(settings)))
    app = create_app(state, registry, rules=ALL_RULES, settings=settings)
    front = WebFront(app, web or WebConfig(), settings.web_auth_exempt_paths)
    config = uvicorn.Config(
        front.guard,
        host=settings.listen_host,
        port=settings.listen_port,
        log_config=None,  # keep our logging setup
        access_log=False,
        lifespan="off",
        ssl_context_factory=front.ssl_context if front.tls else None,
    )
    return tuner, uvicorn.Server(config), front


def raise_open_files_limit() -> None:
    """One socket per target: lift the soft file-descriptor limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


TRIM_MAX_SECONDS = 0.01
FULL_COLLECT_SECONDS = 600.0


def tune_runtime(state: TunerState) -> None:
    """Keep the API quick while the loop works (measured in docs/performance.md).

    - The API thread gets the GIL within 1 ms of asking instead of 5 (`sys.setswitchinterval`):
      a request changes hands a few times on its way through uvicorn.
    - What a publication leaves alive (the evaluation, judgements, windows) is frozen after it:
      the collector's passes never walk it again (at 10,000 targets a middle-generation pass
      took 0.37 s, three of them every six rounds, each holding the GIL). Acyclic garbage is
      still freed at once by reference counting; reference cycles frozen before a young pass
      saw them wait for the full collection every FULL_COLLECT_SECONDS (unfreeze, collect,
      freeze: about 0.5 s at 10,000 targets).
    - Memory freed by the scrapes (pages, bodies) goes back to the system once per publish
      (glibc's `malloc_trim`, about 1 ms with 1,000 targets); without it the heap keeps ~14 MB
      more per 1,000 targets between publications. It holds malloc's lock while it works (the
      API thread waits): should one take over TRIM_MAX_SECONDS, trimming stops.
    """
    sys.setswitchinterval(0.001)
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    collected = time.monotonic()
    trim = _malloc_trim()

    def after_publish(_evaluation: Evaluation) -> None:
        nonlocal collected, trim
        if time.monotonic() - collected >= FULL_COLLECT_SECONDS:
            collected = time.monotonic()
            gc.unfreeze()
            found = gc.collect()
            logger.debug("full collection: %d unreachable objects", found)
        gc.freeze()
        if trim is not None:
            began = time.perf_counter()
            trim(0)
            if time.perf_counter() - began > TRIM_MAX_SECONDS:
                trim = None

    state.subscribe(after_publish)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim` (None elsewhere: musl, macOS)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


class ServeError(Exception):
    """The daemon could not start serving (the API could not listen, say)."""


class ApiThread:
    """uvicorn in a thread with its own event loop: the API answers from the published
    evaluation and never waits behind scrape work in the tuner's loop."""

    def __init__(self, server: uvicorn.Server) -> None:
        self.server = server
        self.thread = threading.Thread(target=self._run, name="api", daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None

    def _run(self) -> None:
        factory = self.server.config.get_loop_factory()
        # uvicorn exits when it cannot bind; `start` reports it
        with suppress(SystemExit), asyncio.Runner(loop_factory=factory) as runner:
            self.loop = runner.get_loop()
            runner.run(self.server.serve())

    def call_soon(self, callback: Callable[..., None], *args: object) -> None:
        """Run `callback(*args)` on the API's event loop, between two of its steps."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(callback, *args)

    def start(self, timeout_seconds: float = 15.0) -> None:
        """Start and wait until it listens; ServeError when it cannot (port in use, say)."""
        self.thread.start()
        deadline = time.monotonic() + timeout_seconds
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                config = self.server.config
                raise ServeError(f"could not listen on {config.host}:{config.port} (see above)")
            time.sleep(0.02)

    @property
    def running(self) -> bool:
        """The API thread is alive."""
        return self.thread.is_alive()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """Ask uvicorn to finish its requests and stop; wait for it."""
        self.server.should_exit = True
        self.thread.join(timeout_seconds)


async def serve(settings: Settings, reload: Callable[[], Settings] | None = None) -> None:
    """Run until SIGINT/SIGTERM; SIGHUP re-reads the config and the web config, and keeps the
    old ones if either is invalid. WebConfigError before anything starts if the web config is."""
    raise_open_files_limit()
    tuner, server, front = build(settings, load_web_config(settings.web_config_file))
    await tuner.start()
    tune_runtime(tuner.state)
    api = ApiThread(server)
    try:
        await asyncio.to_thread(api.start)
        logger.info(
            "sglang-tuner listening on %s://%s:%d (%d target(s))",
            "https" if front.tls else "http", settings.listen_host, settings.listen_port,
            len(tuner.targets),
        )  # fmt: skip
        await _until_stopped(api, tuner, front, reload)
    finally:
        await asyncio.to_thread(api.stop)
        await tuner.stop()


async def _until_stopped(
    api: ApiThread, tuner: Tuner, front: WebFront, reload: Callable[[], Settings] | None
) -> None:
    """Wait for SIGINT or SIGTERM (or the API thread dying); SIGHUP reloads meanwhile."""
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    handlers = {signal.SIGINT: stop.set, signal.SIGTERM: stop.set}
    if reload is not None:
        handlers[signal.SIGHUP] = _reloader(api, tuner, front, reload)
    for signum, handler in handlers.items():
        loop.add_signal_handler(signum, handler)
    try:
        while api.running and not stop.is_set():
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    finally:
        for signum in handlers:
            with suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signum)


def _reloader(
    api: ApiThread, tuner: Tuner, front: WebFront, reload: Callable[[], Settings]
) -> Callable[[], None]:
    def on_sighup() -> None:
        try:
            settings = reload()
            web = load_web_config(settings.web_config_file)
            front.check_reload(web)
            tuner.reload(settings)
        except ConfigError as exc:
            logger.error("reload failed, keeping the running configuration:\n%s", exc)
        except (WebConfigError, OSError) as exc:
            logger.error("reload failed, keeping the running configuration: %s", exc)
        else:
            api.call_soon(front.apply, web, settings.web_auth_exempt_paths)

    return on_sighup
