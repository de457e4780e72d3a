"""The served `/metrics` page: the evaluation's families rendered once per published evaluation,
in the API's thread (never in the scrape loop's), the process's own metrics live on every
request, and gzip when the scraper asks for it.

At 10,000 targets the tuning-health part is about two million samples; Prometheus, several
replicas of it, and people with curl all read the same evaluation until the next one is
published, so it is rendered (and compressed) once for all of them. The `process_*`,
`python_*` and `python_gc_*` families of prometheus_client's own collectors are a few dozen
lines and are read fresh on each request: the daemon's CPU and memory stay live even when its
loop is stuck.

Rendering takes the interpreter from the scrape loop while it runs (about 1 s at 10,000
targets), so the page is rendered again only after MAX_RENDER_SHARE of the time since the last
render allows it: until then a newer evaluation waits and readers get the previous page (its
`sglang_tuner_last_evaluation_timestamp_seconds` says how old). With 100 targets that is a few
milliseconds; at 10,000 targets a page is at most about 15 s behind, the scrape interval of
most Prometheus servers.

A gzip answer is one gzip member spliced from two raw deflate streams: the cached part, ended
with a sync flush (byte-aligned, not final), and the fresh tail, finished; the trailer's CRC-32
is the cached part's combined with the tail's. Any gzip reader inflates it as one stream.
"""

import math
import struct
import threading
import time
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import (
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.registry import CollectorRegistry

from sglang_tuner.evaluation import Evaluation
from sglang_tuner.exporter.collector import TunerCollector

# zlib level 1: the page is repetitive text. At 10,000 targets level 1 makes 141 MB 6.0 MB
# (24x) in 0.3 s; level 6 makes it 5.6 MB (25x) in 1.1 s (docs/performance.md).
GZIP_LEVEL = 1
# At most this share of the wall-clock time goes to rendering and compressing the page.
MAX_RENDER_SHARE = 0.1
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, no mtime, OS unknown


def process_registry() -> CollectorRegistry:
    """prometheus_client's process, platform and garbage-collector metrics, in a registry of
    their own (the global one is left to whoever embeds us)."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


@dataclass(slots=True)
class _Rendered:
    """One evaluation's part of the page, plain and (once asked for) deflated."""

    evaluation: "weakref.ref[Evaluation]"
    plain: bytes
    cost: float  # seconds spent rendering and compressing it
    deflated: bytes | None = None  # raw deflate, sync-flushed: more may follow
    crc: int = 0


class MetricsPage:
    """The `/metrics` body for the published evaluation; thread-safe (the API's worker
    threads call it at once when several scrapers ask together: one renders, the rest wait)."""

    def __init__(
        self,
        collector: TunerCollector,
        latest: Callable[[], Evaluation],
        live: CollectorRegistry | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`latest` returns the published evaluation; `live` is rendered fresh on each request
        (by default prometheus_client's process, platform and GC collectors)."""
        self._collector = collector
        self._latest = latest
        self._live = live if live is not None else process_registry()
        self._lock = threading.Lock()
        self._rendered: _Rendered | None = None
        self._clock = clock
        self._next_render_at = -math.inf
        self.renders_total = 0  # evaluations rendered (tests and benchmarks read it)

    def body(self, gzip: bool = False) -> bytes:
        """The whole page, gzip-compressed when `gzip`."""
        return b"".join(self.pieces(gzip))

    def pieces(self, gzip: bool = False) -> tuple[bytes, ...]:
        """The page as pieces to send one after the other: the rendered part is shared by every
        answer, never copied into each (at 1,000 targets it is 30 MB, and slow readers hold
        their answers for as long as they take)."""
        part = self._part(gzip)
        tail = generate_latest(self._live)
        if not gzip:
            return part.plain, tail
        assert part.deflated is not None
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        deflated_tail = compressor.compress(tail) + compressor.flush(zlib.Z_FINISH)
        crc = zlib.crc32(tail, part.crc)
        size = (len(part.plain) + len(tail)) & 0xFFFFFFFF
        trailer = struct.pack("<II", crc & 0xFFFFFFFF, size)
        return _GZIP_HEADER, part.deflated, deflated_tail + trailer

    def _part(self, deflate: bool) -> _Rendered:
        """The published evaluation's rendered part, rendering or deflating it if nobody has."""
        evaluation = self._latest()
        with self._lock:
            part = self._rendered
            stale = part is None or part.evaluation() is not evaluation
            if stale and (part is None or self._clock() >= self._next_render_at):
                began = time.perf_counter()
                plain = self._collector.text(evaluation).encode()
                cost = time.perf_counter() - began
                part = self._rendered = _Rendered(weakref.ref(evaluation), plain, cost)
                self.renders_total += 1
                self._pause_after(cost)
            assert part is not None
            if deflate and part.deflated is None:
                began = time.perf_counter()
                compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
                part.deflated = compressor.compress(part.plain) + compressor.flush(
                    zlib.Z_SYNC_FLUSH
                )
                part.crc = zlib.crc32(part.plain)
                part.cost += time.perf_counter() - began
                self._pause_after(part.cost)
            return part

    @property
    def render_seconds(self) -> float:
        """What the page being served cost to render and compress (0 before the first)."""
        part = self._rendered
        return part.cost if part is not None else 0.0

    def _pause_after(self, cost: float) -> None:
        """No new render until `cost` is MAX_RENDER_SHARE of the time since this one."""
        self._next_render_at = self._clock() + cost * (1 / MAX_RENDER_SHARE - 1)


def wants_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header accepts gzip (`gzip` or `*`, without `q=0`)."""
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        q = params.replace(" ", "").lower()
        if q.startswith("q="):
            try:
                return float(q[2:]) > 0
            except ValueError:
                return False
        return True
    return False
