"""Scrape limits on a real daemon: pages past `sample_limit`, `label_limit` or
`label_value_length_limit` fail their own target with its reason, while a simulated SGLang server
next to them keeps its scrapes and the daemon's memory stays flat.
"""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import HostileHandler, HostileServer, scrape_success_ratio, vm_mib
from prometheus_client.parser import text_string_to_metric_families
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess

INTERVAL = 0.5
SERIES = 100_000
# target -> (its own limits, the reason it fails with; None: it stays up)
HOSTILE: dict[str, tuple[dict[str, int], str | None]] = {
    "many_series": ({}, "sample_limit_exceeded"),
    "long_value": ({}, "label_value_length_limit_exceeded"),
    "long_value_allowed": ({"label_value_length_limit": 0}, None),
    "many_labels": ({"label_limit": 30}, "label_limit_exceeded"),
    "own_sample_limit": ({"sample_limit": 100}, "sample_limit_exceeded"),
}
GAUGE = b"sglang:num_running_reqs"
PAGES = {
    "many_series": b"".join(GAUGE + b'{i="%d"} 1\n' % i for i in range(SERIES)),
    "long_value": GAUGE + b'{model="' + b"m" * 4096 + b'"} 3\n',
    "many_labels": GAUGE + b"{" + b",".join(b'l%d="x"' % i for i in range(40)) + b"} 3\n",
    "own_sample_limit": b"".join(GAUGE + b'{i="%d"} 1\n' % i for i in range(101)),
}
PAGES["long_value_allowed"] = PAGES["long_value"]
SMALL = GAUGE + b" 1\n"  # what every hostile target serves until the run turns hostile


class Run:
    """The daemon, its targets' server and the RSS it had before the pages turned hostile."""

    def __init__(self, daemon: DaemonProcess, server: HostileServer, rss_before: float) -> None:
        self.daemon, self.server, self.rss_before = daemon, server, rss_before

    def target(self, name: str) -> dict[str, Any]:
        return dict(self.daemon.get(f"/targets/{name}").json())


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    hostile = {"on": False}

    def route(kind: str):  # type: ignore[no-untyped-def]
        def answer(_handler: HostileHandler, endpoint: str) -> bytes:
            if endpoint != "metrics":
                return b""  # /server_info: 404
            return PAGES[kind] if hostile["on"] else SMALL

        return answer

    tmp = tmp_path_factory.mktemp("limits")
    with (
        HostileServer({kind: route(kind) for kind in HOSTILE}) as server,
        SimFleet([ServerSpec("healthy")], warmup_seconds=60.0) as fleet,
    ):
        targets = [{"name": "healthy", "url": fleet.urls[0]}] + [
            {"name": kind, "url": server.url(kind), **own} for kind, (own, _) in HOSTILE.items()
        ]
        daemon = DaemonProcess(Path(tmp), {
            "targets": targets, "scrape_interval_seconds": INTERVAL,
            "scrape_timeout_seconds": 0.4, "evaluation_interval_seconds": 1.0,
        }).start()  # fmt: skip
        try:
            daemon.wait_for(lambda d: _all_up(d, len(targets)))
            assert daemon.proc is not None
            rss_before = vm_mib(daemon.proc.pid)
            hostile["on"] = True
            yield Run(daemon, server, rss_before)
        finally:
            daemon.stop()


def _all_up(daemon: DaemonProcess, count: int) -> bool:
    """Every target scraped, and up."""
    rows = daemon.get("/targets").json()["data"]
    return len(rows) == count and all(t["up"] for t in rows)


def _reasons(run: Run) -> dict[str, str | None]:
    return {t["name"]: t["error_reason"] for t in run.daemon.get("/targets").json()["data"]}


def test_each_limit_fails_its_own_target_with_its_reason(run: Run) -> None:
    expected = {kind: reason for kind, (_, reason) in HOSTILE.items()} | {"healthy": None}
    run.daemon.wait_for(lambda _d: _reasons(run) == expected, timeout=20)
    assert "more than 50000 samples" in run.target("many_series")["error"]
    assert "4096 bytes, more than 2048" in run.target("long_value")["error"]
    samples = {
        (s.name, s.labels.get("target"), s.labels.get("reason")): s.value
        for family in text_string_to_metric_families(run.daemon.get("/metrics").text)
        for s in family.samples
    }
    for kind, (_, reason) in HOSTILE.items():
        assert samples[("sglang_tuner_target_up", kind, None)] == (0.0 if reason else 1.0)
        if reason is not None:
            failures = ("sglang_tuner_scrape_failures_total", kind, reason)
            assert samples[failures] >= 1


def test_the_healthy_server_keeps_its_scrapes_next_to_hostile_pages(run: Run) -> None:
    ratio = scrape_success_ratio(lambda: run.target("healthy"), 10.0, INTERVAL)
    assert ratio >= 0.95


def test_memory_stays_flat_across_pages_past_the_limits(run: Run) -> None:
    run.daemon.wait_for(lambda _d: run.target("many_series")["scrape_failures"], timeout=20)
    time.sleep(20 * INTERVAL)  # twenty scrapes of the 100,000-series page
    assert run.daemon.proc is not None
    assert vm_mib(run.daemon.proc.pid, "VmHWM") - run.rss_before < 100
    assert httpx.get(run.daemon.url + "/healthz", timeout=5).status_code == 200
