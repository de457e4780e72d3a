"""Run the daemon: the tuner loop and the HTTP API (uvicorn) in one asyncio loop."""

import asyncio
import ctypes
import gc
import logging
import resource
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import suppress

import uvicorn
from starlette.types import ASGIApp

from sglang_tuner.api.app import create_app
from sglang_tuner.config.listen import ALL_INTERFACES, format_listen_address
from sglang_tuner.config.settings import ConfigError, Settings, external_url, listen_endpoints
from sglang_tuner.evaluation import Evaluation, TunerState
from sglang_tuner.exporter.collector import TunerCollector
from sglang_tuner.exporter.page import MetricsPage, process_registry
from sglang_tuner.exporter.reloads import ReloadStatus
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
    settings: Settings,
    web: WebConfig | None = None,
    *,
    with_store: bool = True,
    reloads: ReloadStatus | None = None,
    reload: Callable[[], Awaitable[str | None]] | None = None,
) -> tuple[Tuner, uvicorn.Server, WebFront]:
    """Wire state, tuner, collector, API and uvicorn for `settings`, behind `web`; `reload`
    serves POST /-/reload, `reloads` says on /metrics how the last one went."""
    state = TunerState()
    store = Store(settings.database) if with_store else None
    tuner = Tuner(settings, ALL_RULES, state, store)
    live = process_registry()
    live.register(reloads or ReloadStatus())
    page = MetricsPage(TunerCollector(ALL_RULES, external_url(settings)), state.latest, live)
    app = create_app(state, page, rules=ALL_RULES, settings=settings, reload=reload)
    front = WebFront(app, web or WebConfig(), settings.web_auth_exempt_paths)
    config = uvicorn.Config(
        front.guard,
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


def bind_listening(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port for uvicorn to listen on; host "" is every interface
    (IPv6 and IPv4 on one socket where the host has IPv6, else 0.0.0.0), as Go binds ":port"."""
    if host == ALL_INTERFACES:
        if socket.has_ipv6:
            with suppress(OSError):
                sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
                    sock.bind(("::", port))
                except OSError:
                    sock.close()
                    raise
                return sock
        host = "0.0.0.0"
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


class ServeError(Exception):
    """The daemon could not start serving (the API could not listen, say)."""


class ApiThread:
    """uvicorn in a thread with its own event loop: the API answers from the published
    evaluation and never waits behind scrape work in the tuner's loop."""

    def __init__(self, server: uvicorn.Server, endpoints: Sequence[tuple[str, int]]) -> None:
        self.server = server
        self.endpoints = list(endpoints)
        self.sockets: list[socket.socket] = []
        self.thread = threading.Thread(target=self._run, name="api", daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None

    def _run(self) -> None:
        factory = self.server.config.get_loop_factory()
        if sys.version_info < (3, 11):  # no asyncio.Runner: the loop by hand
            self.loop = loop = (factory or asyncio.new_event_loop)()
            with suppress(SystemExit):
                try:
                    loop.run_until_complete(self.server.serve(sockets=self.sockets))
                finally:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.close()
            return
        # uvicorn exits when it cannot bind; `start` reports it
        with suppress(SystemExit), asyncio.Runner(loop_factory=factory) as runner:
            self.loop = runner.get_loop()
            runner.run(self.server.serve(sockets=self.sockets))

    def call_soon(self, callback: Callable[..., None], *args: object) -> None:
        """Run `callback(*args)` on the API's event loop, between two of its steps."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(callback, *args)

    def start(self, timeout_seconds: float = 15.0) -> None:
        """Bind every address, start and wait until it serves; ServeError when it cannot (port
        in use, say)."""
        for host, port in self.endpoints:
            try:
                self.sockets.append(bind_listening(host, port))
            except OSError as exc:
                for sock in self.sockets:
                    sock.close()
                where = format_listen_address(host or "0.0.0.0", port)
                raise ServeError(f"could not listen on {where}: {exc.strerror or exc}") from None
        self.thread.start()
        deadline = time.monotonic() + timeout_seconds
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise ServeError(f"could not serve on {self.addresses} (see above)")
            time.sleep(0.02)

    @property
    def addresses(self) -> str:
        """The bound addresses, for the log (the real port where 0 was asked)."""
        bound = [sock.getsockname()[:2] for sock in self.sockets]
        return ", ".join(format_listen_address(h, p) for h, p in bound) or "nothing"

    @property
    def running(self) -> bool:
        """The API thread is alive."""
        return self.thread.is_alive()

    def stop(self, timeout_seconds: float = 5.0) -> None:
        """Ask uvicorn to finish its requests and stop; wait for it."""
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout_seconds)
        for sock in self.sockets:
            sock.close()


async def serve(settings: Settings, reload: Callable[[], Settings] | None = None) -> None:
    """Run until SIGINT/SIGTERM; SIGHUP re-reads the config and the web config, and keeps the
    old ones if either is invalid. WebConfigError before anything starts if the web config is."""
    raise_open_files_limit()
    reloads, loop = ReloadStatus(), asyncio.get_running_loop()
    reloader: Reloader | None = None

    async def reload_from_api() -> str | None:  # on the API's loop: the reload runs on ours
        assert reloader is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(reloader.run(), loop))

    web = load_web_config(settings.web_config_file)
    api_reload = reload_from_api if reload is not None else None
    tuner, server, front = build(settings, web, reloads=reloads, reload=api_reload)
    await tuner.start()
    tune_runtime(tuner.state)
    api = ApiThread(server, listen_endpoints(settings))
    if reload is not None:
        reloader = Reloader(api, tuner, front, reload, reloads)
    try:
        await asyncio.to_thread(api.start)
        logger.info(
            "sglang-tuner listening on %s://%s (%d target(s))",
            "https" if front.tls else "http", api.addresses, len(tuner.watch.servers),
        )  # fmt: skip
        await _until_stopped(api, reloader)
    finally:
        await asyncio.to_thread(api.stop)
        await tuner.stop()


async def _until_stopped(api: ApiThread, reloader: "Reloader | None") -> None:
    """Wait for SIGINT or SIGTERM (or the API thread dying); SIGHUP reloads meanwhile."""
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    handlers: dict[signal.Signals, Callable[[], object]] = {
        signal.SIGINT: stop.set,
        signal.SIGTERM: stop.set,
    }
    if reloader is not None:
        handlers[signal.SIGHUP] = reloader.__call__
    for signum, handler in handlers.items():
        loop.add_signal_handler(signum, handler)
    try:
        while api.running and not stop.is_set():
            with suppress(asyncio.TimeoutError):  # not the built-in TimeoutError on 3.10
                await asyncio.wait_for(stop.wait(), 1.0)
    finally:  # stopping: a second signal must not end the process before its last save
        for signum in handlers:
            with suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, _while_stopping, signum)


def _while_stopping(signum: signal.Signals) -> None:
    """A signal after the stop began (a second Ctrl-C, SIGTERM or SIGHUP): ignored, as
    Prometheus does; removing the handlers instead had restored the default, and a second
    SIGTERM ended the process before it saved."""
    logger.info("%s while stopping: ignored, the shutdown goes on", signum.name)


SIGNAL_SETTLE_SECONDS = 0.5  # SIGHUPs within this of the first are one reload


class Reloader:
    """Re-reads the config and the web config (SIGHUP, POST /-/reload) and applies them; keeps
    the running ones when either is invalid. Runs on the tuner's loop: the files are read and
    checked in a worker thread (a 10 MB config takes seconds to parse), only the new settings are
    applied on the loop, one reload at a time; SIGHUPs that arrive while one waits to start are
    that reload (a storm of 50 in a second is two or three reloads, not 50 back to back)."""

    def __init__(
        self,
        api: ApiThread,
        tuner: Tuner,
        front: WebFront,
        read: Callable[[], Settings],
        status: ReloadStatus,
    ) -> None:
        self._api, self._tuner, self._front, self._read = api, tuner, front, read
        self.status = status
        self._lock = asyncio.Lock()
        self._signalled = False  # a SIGHUP waits for its reload
        self._tasks: set[asyncio.Task[str | None]] = set()

    def __call__(self) -> None:
        """SIGHUP: a reload, unless one asked for by a signal is still waiting to start."""
        if self._signalled:
            return
        self._signalled = True
        task = asyncio.get_running_loop().create_task(self.run(signalled=True))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run(self, signalled: bool = False) -> str | None:
        """Reload once the reload before it ended; None when it worked, else why not (also
        logged, and on /metrics). A signal's reload starts `SIGNAL_SETTLE_SECONDS` later: the
        signals sent meanwhile are the same reload."""
        if signalled:
            await asyncio.sleep(SIGNAL_SETTLE_SECONDS)
        async with self._lock:
            if signalled:
                self._signalled = False  # a SIGHUP from now on asks for one more
            try:
                settings, web = await asyncio.to_thread(self._checked)
                self._tuner.reload(settings)
            except ConfigError as exc:
                problem = f"reload failed, keeping the running configuration:\n{exc}"
            except (WebConfigError, OSError) as exc:
                problem = f"reload failed, keeping the running configuration: {exc}"
            else:
                self._api.call_soon(self._front.apply, web, settings.web_auth_exempt_paths)
                self.status.record(True)
                return None
            logger.error("%s", problem)
            self.status.record(False)
            return problem

    def _checked(self) -> tuple[Settings, WebConfig]:
        """The new settings and web config, read and checked (in a worker thread)."""
        settings = self._read()
        web = load_web_config(settings.web_config_file)
        self._front.check_reload(web)
        return settings, web
