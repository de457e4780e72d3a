"""SGLang's Model Gateway as a source: one scrape of its `/engine_metrics` page, one target per
worker it lists (named `<gateway name>/<worker host:port>`).

The page is the gateway's, its worker list a peer's word: the gateway's API key and TLS client
certificate go only to a worker on the gateway's own host, a worker's `user:password@` never
reaches a target name, and a page listing more than MAX_WORKERS workers, or a worker URL longer
than MAX_WORKER_URL_CHARS, fails with `worker_limit_exceeded` before it costs more (20,000
workers once took 1.3 GB).

The page's format is the gateway's own (sgl-project/sglang
`sgl-model-gateway/src/core/metrics_aggregator.rs`, rendered by sinkingpoint/openmetrics-parser):
it GETs every worker's `/metrics`, replaces every ":" in the text with "_" (so `sglang:x` arrives
as `sglang_x`, which the mapper reads as it reads an underscore-escaped page), adds
`worker_addr="<worker URL>"` to every sample, and merges the families by name: HELP and TYPE
once, then every worker's samples. A worker that does not answer is left out of the page.
"""

import dataclasses
import re
import ssl
import time
from urllib.parse import urlsplit

from sglang_tuner.model.scrape import ScrapeLimits, ScrapeResult, Snapshot
from sglang_tuner.model.secrets import redact_url_secrets
from sglang_tuner.model.target_spec import TargetSpec, TargetTLS
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.scrape import ScrapeError, fetch_body, map_body
from sglang_tuner.sources.sglang import SignalMapper
from sglang_tuner.sources.target import DEFAULT_LIMITS, TargetSource, own_limits
from sglang_tuner.sources.timeout import timeout

ENGINE_METRICS_PATH = "/engine_metrics"
MAX_WORKERS = 2_000
MAX_WORKER_URL_CHARS = 2_048
_WORKER = re.compile(rb',?worker_addr="([^"]*)"')


def split_by_worker(body: bytes) -> dict[str, bytes]:
    """Each worker's page out of the gateway's: its samples, without `worker_addr`, under the
    HELP/TYPE lines of their families; keyed by the worker's URL."""
    pages: dict[bytes, list[bytes]] = {}
    meta: list[bytes] = []  # the current family's HELP/TYPE lines
    given: set[bytes] = set()  # the workers whose page has them already
    for line in body.splitlines():
        if line.startswith(b"#"):
            if given:  # the previous family had samples: this line starts the next one
                meta, given = [], set()
            meta.append(line)
            continue
        found = _WORKER.search(line)
        if found is None:
            continue  # a blank line, or a sample of no worker
        worker = found.group(1)
        page = pages.get(worker)
        if page is None:
            page = pages[worker] = _new_worker(worker, len(pages))
        if worker not in given:
            page.extend(meta)
            given.add(worker)
        page.append(_without_worker(line, found))
    return {w.decode("utf-8", "replace"): b"\n".join(p) + b"\n" for w, p in pages.items()}


def _new_worker(worker: bytes, known: int) -> list[bytes]:
    """An empty page for one more worker, within the limits."""
    if len(worker) > MAX_WORKER_URL_CHARS:
        raise ScrapeError(
            "worker_limit_exceeded",
            f"a worker URL of {len(worker):,} characters (at most {MAX_WORKER_URL_CHARS:,})",
        )
    if known >= MAX_WORKERS:
        raise ScrapeError(
            "worker_limit_exceeded", f"more than {MAX_WORKERS:,} workers listed on one page"
        )
    return []


def _without_worker(line: bytes, found: re.Match[bytes]) -> bytes:
    """The sample line as the worker wrote it: `worker_addr` and its comma removed."""
    head, tail = line[: found.start()], line[found.end() :]
    if head.endswith(b"{") and tail.startswith(b","):
        tail = tail[1:]
    elif head.endswith(b"{") and tail.startswith(b"}"):
        head, tail = head[:-1], tail[1:]
    return head + tail


def worker_name(gateway: str, worker_url: str) -> str:
    """`<gateway>/<host:port>` for a worker URL (the URL itself when it has no host), never
    with the URL's `user:password@`."""
    address = urlsplit(worker_url).netloc.rpartition("@")[2]
    return f"{gateway}/{address or redact_url_secrets(worker_url)}"


def same_host(url: str, other: str) -> bool:
    """True when two URLs name the same host (credentials for one may go to the other)."""
    try:
        host, other_host = urlsplit(url).hostname, urlsplit(other).hostname
    except ValueError:
        return False
    return host is not None and host == other_host


def trust_only(tls: TargetTLS | None) -> TargetTLS | None:
    """What of a `tls_config` may go to another host: whom to trust (the CA, or no verification)
    but no client certificate, and no `server_name` (the gateway host's name)."""
    if tls is None:
        return None
    trust = dataclasses.replace(tls, cert_file=None, key_file=None, server_name=None)
    return None if trust == TargetTLS() else trust


class GatewayWorkerSource(TargetSource):
    """A worker behind a gateway: its `/server_info` (and log, DCGM) read as any target's; its
    metrics come from the gateway's page, never from a scrape of its own."""


class GatewaySource:
    """One gateway: its connections, the workers its latest page listed, a mapper per worker."""

    def __init__(self, spec: TargetSpec, ssl_context: ssl.SSLContext | None = None) -> None:
        self.spec = spec
        self.client = HttpClient(ssl_context, tls=spec.tls)
        self.workers: dict[str, TargetSpec] = {}  # target name -> the worker, as a target
        self.names: set[str] = set()  # the targets the latest scrape gave results for
        self.gone: set[str] = set()  # the ones before it that it no longer gave
        self._mappers: dict[str, SignalMapper] = {}  # counter state for rates: one per worker

    @property
    def page_name(self) -> str:
        """The target that stands for the page while it fails before listing any worker:
        `<gateway name>/engine_metrics`, down, with the page's error."""
        return self.spec.name + ENGINE_METRICS_PATH

    def spec_of(self, name: str) -> TargetSpec:
        """A target of this gateway: one of its workers, or `page_name`."""
        worker = self.workers.get(name)
        if worker is not None:
            return worker
        return dataclasses.replace(self.spec, name=self.page_name, gateway=False)

    def worker_spec(self, name: str, url: str) -> TargetSpec:
        """The gateway's settings (profile, labels, TLS, limits) for one of its workers; its API
        key and TLS client certificate only for a worker on the gateway's own host (they were
        configured for that host)."""
        near = same_host(url, self.spec.url)
        return dataclasses.replace(
            self.spec, name=name, url=url.rstrip("/"), gateway=False,
            log_file=None, log_command=(), dcgm_url=None,
            token=self.spec.token if near else None,
            tls=self.spec.tls if near else trust_only(self.spec.tls),
        )  # fmt: skip

    async def scrape(
        self,
        now: float,
        timeout_seconds: float,
        max_body_bytes: int,
        limits: ScrapeLimits = DEFAULT_LIMITS,
    ) -> dict[str, ScrapeResult]:
        """GET `/engine_metrics`: a result per worker listed (`workers` follows the page). A
        page that fails is a failed result for every known worker, or for `page_name` while it
        has listed none, so the failure shows as a target that is down."""
        results = await self._read(now, timeout_seconds, max_body_bytes, limits)
        self.gone, self.names = self.names - results.keys(), set(results)
        return results

    async def _read(
        self, now: float, timeout_seconds: float, max_body_bytes: int, limits: ScrapeLimits
    ) -> dict[str, ScrapeResult]:
        limits = own_limits(self.spec, limits)
        url = self.spec.url + ENGINE_METRICS_PATH
        started = time.perf_counter()
        try:
            async with timeout(timeout_seconds):
                body = await fetch_body(self.client, url, max_body_bytes)
        except ScrapeError as exc:
            return self._failed(now, started, exc.reason, str(exc))
        except TimeoutError:
            message = f"GET {url} took longer than {timeout_seconds:g} s"
            return self._failed(now, started, "timeout", message)
        try:
            pages = split_by_worker(body)
        except ScrapeError as exc:
            return self._failed(now, started, exc.reason, f"GET {url}: {exc}")
        if not pages:
            message = f"GET {url} listed no worker's metrics (workers without --enable-metrics?)"
            return self._failed(now, started, "no_sglang_metrics", message)
        named = {worker_name(self.spec.name, w): page for w, page in pages.items()}
        self.workers = {n: self.worker_spec(n, w) for n, w in zip(named, pages, strict=True)}
        self._mappers = {n: self._mappers.get(n) or SignalMapper() for n in named}
        return {n: self._map(n, page, now, started, url, limits) for n, page in named.items()}

    def _map(
        self, name: str, page: bytes, now: float, started: float, url: str, limits: ScrapeLimits
    ) -> ScrapeResult:
        """One worker's result from its part of the page."""
        mapper = self._mappers[name]
        try:
            values = map_body(mapper, page, now, url, limits)
        except ScrapeError as exc:
            return _failed(name, now, started, exc.reason, str(exc))
        duration = time.perf_counter() - started
        snapshot = Snapshot(target=name, ts=now, values=values)
        return ScrapeResult(name, now, duration, snapshot, duplicate_samples=mapper.duplicates)

    def _failed(
        self, now: float, started: float, reason: str, error: str
    ) -> dict[str, ScrapeResult]:
        names = list(self.workers) or [self.page_name]
        return {name: _failed(name, now, started, reason, error) for name in names}

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


def _failed(name: str, now: float, started: float, reason: str, error: str) -> ScrapeResult:
    """A failed result (never with the password of a `user:password@` URL)."""
    duration = time.perf_counter() - started
    return ScrapeResult(name, now, duration, error_reason=reason, error=redact_url_secrets(error))
