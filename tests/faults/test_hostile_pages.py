"""Hostile targets on a real daemon: pages that repeat series, hold NaN and infinities, inflate
from kilobytes to gigabytes, never end or trickle, and `/server_info` bodies too deep or too large.
Each fails (or is read) on its own while a simulated SGLang server next to them keeps its scrapes,
and the daemon neither crashes nor grows.
"""

import functools
import time
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    HostileHandler,
    HostileServer,
    Route,
    scrape_success_ratio,
    socket_buffer_bytes,
    vm_mib,
)
from prometheus_client.parser import text_string_to_metric_families
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import FIXTURES, DaemonProcess

INTERVAL = 0.5
MIB = 1024 * 1024
# What a server can write past the point where the daemon stopped reading: the kernel's socket
# buffers, and a little more for the reads in flight when the cap was reached.
IN_FLIGHT = socket_buffer_bytes() + 8 * MIB
PAGE = (FIXTURES / "sglang" / "v0.5.17_a.prom").read_bytes()  # token_usage 0.8
LABELS = (
    b'{engine_type="unified",model_name="Qwen/Qwen2.5-7B-Instruct",'
    b'moe_ep_rank="0",pp_rank="0",tp_rank="0"}'
)  # the page's token_usage series


def _duplicates(_handler: HostileHandler, endpoint: str) -> bytes:
    """The page with its token usage line repeated at another value: 0.8 + 16.65 when summed."""
    return PAGE + b"sglang:token_usage" + LABELS + b" 16.65\n" if endpoint == "metrics" else b""


def _nan_inf(_handler: HostileHandler, endpoint: str) -> bytes:
    """The page with gauges rules read at NaN, +Inf and -Inf."""
    if endpoint != "metrics":
        return b""
    page = PAGE
    for name, value in ((b"num_queue_reqs", b"+Inf"), (b"token_usage", b"NaN"),
                        (b"gen_throughput", b"-Inf"), (b"num_running_reqs", b"+Inf")):  # fmt: skip
        head = b"sglang:" + name + LABELS + b" "
        start = page.index(head) + len(head)
        page = page[:start] + value + page[page.index(b"\n", start) :]
    return page


def _deep_info(_handler: HostileHandler, endpoint: str) -> bytes:
    """A good page; `/server_info` nested 100,000 deep (json.loads raises RecursionError)."""
    return PAGE if endpoint == "metrics" else b"[" * 100_000 + b"]" * 100_000


def _huge_info(_handler: HostileHandler, endpoint: str) -> bytes | Iterator[bytes]:
    """A good page; `/server_info` 200 MiB long, without a Content-Length."""
    if endpoint == "metrics":
        return PAGE
    return iter([b'{"pad": "'] + [b"x" * MIB] * 200)


@functools.cache
def _bomb() -> bytes:
    """1 GiB of exposition text, gzipped to 2.5 MiB."""
    line = b"sglang:num_queue_reqs 1\n"
    chunk = (line * (MIB // len(line) + 1))[:MIB]
    gzip = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return b"".join([gzip.compress(chunk) for _ in range(1024)] + [gzip.flush()])


def _gzip_bomb(handler: HostileHandler, endpoint: str) -> None:
    """A page of 2.5 MiB that inflates to 1 GiB."""
    if endpoint == "metrics":
        handler.send_bytes(_bomb(), Content_Encoding="gzip")
    else:
        handler.send_bytes(b"Not Found", status=404)


HUGE_BODY_MIB = 512


def _huge_body(_handler: HostileHandler, endpoint: str) -> bytes | Iterator[bytes]:
    """A 512 MiB page without a Content-Length (one 1 MiB chunk sent again and again)."""
    line = b"sglang:num_queue_reqs 1\n"
    return iter([line * (MIB // len(line))] * HUGE_BODY_MIB) if endpoint == "metrics" else b""


def _trickle(handler: HostileHandler, endpoint: str) -> None:
    """The page at one byte a second."""
    if endpoint != "metrics":
        handler.send_bytes(b"Not Found", status=404)
        return
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(PAGE)))
    handler.end_headers()
    handler.close_connection = True
    try:
        for i in range(len(PAGE)):
            handler.wfile.write(PAGE[i : i + 1])
            handler.wfile.flush()
            time.sleep(1.0)
    except OSError:
        pass  # the client gave up


ROUTES: dict[str, Route] = {
    "duplicates": _duplicates,
    "nan_inf": _nan_inf,
    "deep_info": _deep_info,
    "huge_info": _huge_info,
    "gzip_bomb": _gzip_bomb,
    "huge_body": _huge_body,
    "trickle": _trickle,
}


class Run:
    """The daemon, its hostile targets' server and the RSS it had before they turned hostile."""

    def __init__(self, daemon: DaemonProcess, server: HostileServer) -> None:
        self.daemon, self.server = daemon, server
        assert daemon.proc is not None
        self.pid = daemon.proc.pid
        self.rss_before = vm_mib(self.pid)

    def target(self, name: str) -> dict[str, Any]:
        return dict(self.daemon.get(f"/targets/{name}").json())

    def metric(self, name: str, target: str) -> float | None:
        for family in text_string_to_metric_families(self.daemon.get("/metrics").text):
            for s in family.samples:
                if s.name == name and s.labels.get("target") == target:
                    return float(s.value)
        return None


def _gated(route: Route, hostile: dict[str, bool]) -> Route:
    """`route` once `hostile["on"]`; before, the plain page and no `/server_info`."""

    def answer(handler: HostileHandler, endpoint: str) -> Iterable[bytes] | bytes | None:
        if hostile["on"]:
            return route(handler, endpoint)
        return PAGE if endpoint == "metrics" else b""

    return answer


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp, hostile = tmp_path_factory.mktemp("hostile"), {"on": False}
    _bomb()  # built before the daemon starts
    with (
        HostileServer({k: _gated(route, hostile) for k, route in ROUTES.items()}) as server,
        SimFleet([ServerSpec("healthy")], warmup_seconds=60.0) as fleet,
    ):
        targets = [{"name": "healthy", "url": fleet.urls[0]}]
        targets += [{"name": kind, "url": server.url(kind)} for kind in ROUTES]
        daemon = DaemonProcess(Path(tmp), {
            "targets": targets, "scrape_interval_seconds": INTERVAL,
            "scrape_timeout_seconds": 0.4, "evaluation_interval_seconds": 1.0,
            "window_seconds": 10.0, "min_samples": 3, "hold_for_seconds": 0.0,
        }).start()  # fmt: skip
        try:
            daemon.wait_for(lambda d: _all_scraped(d, len(targets)))
            running = Run(daemon, server)
            hostile["on"] = True
            yield running
        finally:
            daemon.stop()


def _all_scraped(daemon: DaemonProcess, count: int) -> bool:
    """Every target scraped at least once."""
    rows = daemon.get("/targets").json()["data"]
    return len(rows) == count and all(t["up"] is not None for t in rows)


def test_a_repeated_series_is_read_once_and_counted(run: Run) -> None:
    run.daemon.wait_for(lambda _d: run.target("duplicates")["duplicate_samples_total"], timeout=20)
    target = run.target("duplicates")
    assert target["up"] and target["signals"]["token_usage"] == 0.8  # not 17.45
    assert (run.metric("sglang_tuner_scrape_duplicate_samples_total", "duplicates") or 0) >= 1


def test_nan_and_infinite_gauges_are_missing_values_not_evidence(run: Run) -> None:
    run.daemon.wait_for(lambda _d: run.target("nan_inf")["samples_in_window"] >= 6, timeout=20)
    target = run.target("nan_inf")
    assert target["up"] and target["error_reason"] is None
    advice = run.daemon.get("/advice", params={"target": "nan_inf"}).json()["data"]
    evidence = [a["evidence"].lower() for a in advice]
    assert not [e for e in evidence if "inf" in e or "nan" in e], evidence
    assert "token_usage" not in target["signals"] and "num_queue_reqs" not in target["signals"]


def test_server_info_too_deep_or_too_large_is_a_config_error_not_a_crash(run: Run) -> None:
    expected = {
        "deep_info": "returned JSON nested deeper than 32 levels",
        "huge_info": "returned more than 4 MiB; aborted",
    }

    def shown(_d: DaemonProcess) -> bool:
        errors = {kind: run.target(kind)["config_error"] or "" for kind in expected}
        return all(expected[kind] in error for kind, error in errors.items())

    run.daemon.wait_for(shown, timeout=20)  # /server_info is asked for again every 5 s
    assert run.target("deep_info")["up"] and run.target("huge_info")["up"]  # /metrics is fine
    # of 200 MiB: the read stopped at the 4 MiB cap (plus what the socket buffers took)
    assert run.server.sent["huge_info"] < 4 * MIB + IN_FLIGHT < 200 * MIB
    assert "Traceback" not in run.daemon.logs() and "RecursionError" not in run.daemon.logs()


def test_pages_that_never_end_fail_at_the_size_cap_or_the_timeout(run: Run) -> None:
    expected = {"gzip_bomb": "body_too_large", "huge_body": "body_too_large", "trickle": "timeout"}
    run.daemon.wait_for(
        lambda _d: {kind: run.target(kind)["error_reason"] for kind in expected} == expected,
        timeout=20,
    )
    assert "more than 16 MiB" in run.target("gzip_bomb")["error"]  # inflated, not on the wire
    # of 512 MiB: the read stopped at the 16 MiB cap (plus what the socket buffers took)
    assert run.server.sent["huge_body"] < 16 * MIB + IN_FLIGHT < HUGE_BODY_MIB * MIB


def test_memory_stays_flat_across_hostile_targets(run: Run) -> None:
    run.daemon.wait_for(lambda _d: run.server.sent["huge_info"] > 0, timeout=20)
    time.sleep(20 * INTERVAL)
    assert vm_mib(run.pid, "VmHWM") - run.rss_before < 100


def test_the_healthy_server_keeps_its_scrapes_next_to_hostile_targets(run: Run) -> None:
    ratio = scrape_success_ratio(lambda: run.target("healthy"), 10.0, INTERVAL)
    assert ratio >= 0.95
