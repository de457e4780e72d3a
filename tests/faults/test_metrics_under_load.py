"""The daemon's own `/metrics` read in a loop at fleet size: the healthy target keeps its scrape
schedule while the page is read back to back (as gzip, as Prometheus asks), each answer comes at
once from the page rendered for the evaluation, and each is a whole, valid page. A real daemon,
a simulated SGLang server and 2,000 targets that refuse connections (a rack powered off: the
page is largest per scrape made); the 10,000-target figures are `bench/metrics_load.py`'s
(docs/performance.md)."""

import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess
from tests.helpers import scrape_success_ratio

pytestmark = pytest.mark.integration

REFUSING = 2_000
INTERVAL = 2.0


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with SimFleet([ServerSpec("healthy")], speed=10.0) as fleet:
        yield fleet.urls[0]


def _refusing(count: int) -> list[dict[str, str]]:
    """Targets on loopback addresses where nothing listens on port 9: refused at once."""
    return [
        {"name": f"off-{i}", "url": f"http://127.0.{1 + i // 250}.{1 + i % 250}:9"}
        for i in range(count)
    ]


class Reader:
    """GETs /metrics back to back in a thread, as gzip; keeps each answer's size and time."""

    def __init__(self, url: str) -> None:
        self.url, self.sizes, self.seconds = url + "/metrics", [], []  # type: ignore[var-annotated]
        self.last = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self._stop.is_set():
                began = time.perf_counter()
                response = client.get(self.url, headers={"Accept-Encoding": "gzip"})
                assert response.headers["content-encoding"] == "gzip"
                self.seconds.append(time.perf_counter() - began)
                self.sizes.append(response.num_bytes_downloaded)  # on the wire
                self.last = response.content  # inflated by httpx

    def __enter__(self) -> "Reader":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def test_the_healthy_target_keeps_its_scrapes_while_metrics_is_read_in_a_loop(
    server: str, tmp_path: Path
) -> None:
    config = {
        "scrape_interval_seconds": INTERVAL,
        "scrape_timeout_seconds": 1.5,
        "evaluation_interval_seconds": INTERVAL,
        "targets": [{"name": "healthy", "url": server}, *_refusing(REFUSING)],
    }
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        daemon.wait_for(lambda d: d.get("/targets/healthy").json()["up"], timeout=30)

        def target() -> dict:  # type: ignore[type-arg]
            return dict(daemon.get("/targets/healthy", timeout=30).json())

        with Reader(daemon.url) as reader:
            time.sleep(2.0)  # the first render under way
            ratio = scrape_success_ratio(target, 24.0, INTERVAL)
        assert ratio >= 0.95, (target()["scrape_failures"], target()["scrapes_total"])
        assert target()["scrape_failures"] == {}
        # answers came all along from the page rendered once per evaluation (before: each GET
        # rendered the page anew, seconds at this size, 17-31 s at 10,000 targets)
        assert len(reader.seconds) >= 10
        assert statistics.median(reader.seconds) < 1.0
        page = reader.last.decode()
        assert max(reader.sizes) < len(reader.last) / 5  # gzip on the wire
        assert page.count("sglang_tuner_target_up{") == REFUSING + 1
        assert page.endswith("\n") and "process_resident_memory_bytes" in page
    finally:
        daemon.stop()
