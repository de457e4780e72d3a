"""One process serving a real-size SGLang page on N ports, counting scrapes per client.

The page is the v0.5.23 two-DP-rank fixture; its counters and histograms advance by the
fixture's own a -> b increase every interval (gauges alternate between a and b), so scrapers
see a live server, not a frozen one. Pages are rendered and gzipped once per interval, shared by
every port: serving costs a dict lookup and a write. Scrapes are counted per User-Agent product
(`Prometheus`, `sglang-tuner`, ...) and port, with their times (CLOCK_MONOTONIC, which every
process on the machine shares); GET /counts on the control port returns them as JSON.

    python bench/page_server.py --port 20000 --count 1000 --control 19999
"""

import argparse
import asyncio
import gzip
import json
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "sglang"
PAGE_A = FIXTURES / "v0.5.23_dp2_full_a.prom"
PAGE_B = FIXTURES / "v0.5.23_dp2_full_b.prom"
CUMULATIVE = ("counter", "histogram", "summary")


def _sample_rows(text: str) -> list[tuple[str, float | None, str]]:
    """(line head, value or None for comments, family type) per line."""
    rows: list[tuple[str, float | None, str]] = []
    kind = "untyped"
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            kind = line.split()[3]
        if not line or line.startswith("#"):
            rows.append((line, None, kind))
            continue
        head, _, value = line.rpartition(" ")
        rows.append((head, float(value), kind))
    return rows


class LivePage:
    """The fixture page as it reads `slot` intervals after a, for any slot >= 0."""

    def __init__(self, a: str, b: str) -> None:
        self._a, self._b = _sample_rows(a), _sample_rows(b)
        if [r[0] for r in self._a] != [r[0] for r in self._b]:
            raise ValueError("the a and b pages must have the same series in the same order")

    def render(self, slot: int) -> bytes:
        """The page text of interval `slot`."""
        lines = []
        for (head, va, kind), (_, vb, _) in zip(self._a, self._b, strict=True):
            if va is None or vb is None:
                lines.append(head)
            elif kind in CUMULATIVE:
                lines.append(f"{head} {va + slot * (vb - va)!r}")
            else:
                lines.append(f"{head} {(vb if slot % 2 else va)!r}")
        return ("\n".join(lines) + "\n").encode()

    def line_count(self) -> int:
        """Lines of one page."""
        return len(self._a)


def _response(body: bytes, ctype: str, code: str = "200 OK", gzipped: bool = False) -> bytes:
    encoding = "Content-Encoding: gzip\r\n" if gzipped else ""
    head = f"HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
    return (head + encoding + "\r\n").encode() + body


class Pages:
    """The current interval's responses (plain and gzip), re-rendered when the interval turns."""

    def __init__(self, page: LivePage, interval: float, info: bytes) -> None:
        self.page, self.interval, self.started = page, interval, time.monotonic()
        self.slot = -1
        self.plain = self.gzipped = b""
        self.info = _response(info, "application/json")
        self.missing = _response(b'{"detail":"Not Found"}', "application/json", "404 Not Found")

    def metrics(self, gzip_ok: bool) -> bytes:
        """The /metrics response for now."""
        slot = int((time.monotonic() - self.started) / self.interval)
        if slot != self.slot:
            body = self.page.render(slot)
            ctype = "text/plain; version=0.0.4; charset=utf-8"
            self.plain = _response(body, ctype)
            self.gzipped = _response(gzip.compress(body, 6), ctype, gzipped=True)
            self.slot = slot
        return self.gzipped if gzip_ok else self.plain


class Counts:
    """Scrape times per client product and port index."""

    def __init__(self) -> None:
        self.times: dict[str, dict[int, list[float]]] = {}
        self.other: dict[str, int] = {}

    def add(self, agent: str, index: int) -> None:
        """Record one /metrics request."""
        per_port = self.times.setdefault(agent, {})
        per_port.setdefault(index, []).append(time.monotonic())


class PageProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, GET only: /metrics, /server_info, 404 elsewhere."""

    def __init__(self, index: int, pages: Pages, counts: Counts) -> None:
        self.index, self.pages, self.counts = index, pages, counts
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            self._answer(head.decode("latin-1"))

    def _answer(self, head: str) -> None:
        lines = head.split("\r\n")
        path = lines[0].split(" ")[1] if " " in lines[0] else ""
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        assert self.transport is not None
        if path == "/metrics":
            agent = headers.get("user-agent", "-").split("/")[0].split(" ")[0]
            self.counts.add(agent, self.index)
            self.transport.write(self.pages.metrics("gzip" in headers.get("accept-encoding", "")))
        elif path in ("/server_info", "/get_server_info"):
            self.counts.other[path] = self.counts.other.get(path, 0) + 1
            self.transport.write(self.pages.info)
        else:
            self.transport.write(self.pages.missing)
        if headers.get("connection", "").lower() == "close":
            self.transport.close()


class ControlProtocol(asyncio.Protocol):
    """GET /counts -> the scrape times as JSON; then close."""

    def __init__(self, counts: Counts, pages: Pages) -> None:
        self.counts, self.pages = counts, pages

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if b"\r\n\r\n" not in data:
            return
        payload = {
            "times": self.counts.times,
            "other": self.counts.other,
            "page_lines": self.pages.page.line_count(),
            "page_bytes": len(self.pages.page.render(0)),
        }
        body = json.dumps(payload).encode()
        self.transport.write(_response(body, "application/json"))
        self.transport.close()


async def serve(first_port: int, count: int, control: int, pages: Pages) -> None:
    """Listen on every port and the control port until killed."""
    loop = asyncio.get_running_loop()
    counts = Counts()
    for index in range(count):
        await loop.create_server(
            lambda i=index: PageProtocol(i, pages, counts),  # type: ignore[misc]
            "127.0.0.1", first_port + index, backlog=1024, reuse_address=True,
        )  # fmt: skip
    await loop.create_server(lambda: ControlProtocol(counts, pages), "127.0.0.1", control)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="first of COUNT ports")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--control", type=int, required=True, help="port answering GET /counts")
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--server-info", type=Path, help="JSON body served at /server_info")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    page = LivePage(PAGE_A.read_text(), PAGE_B.read_text())
    info = args.server_info.read_bytes() if args.server_info else b"{}"
    asyncio.run(serve(args.port, args.count, args.control, Pages(page, args.interval, info)))


if __name__ == "__main__":
    main()
