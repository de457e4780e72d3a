"""A log command that prints more than the buffer holds between two scrapes, against a real
daemon process: the oldest lines are dropped, and `/targets` and `/metrics` count them beside the
lines cut for length; a target without a log shows no counts."""

import sys
from collections.abc import Iterator

import pytest
from sglang_sim import ServerSpec, SimFleet

pytestmark = pytest.mark.integration
# 24 MiB of short lines at once, and one line of 100 KB: more than the 16 MiB buffer
FLOOD = (
    "import sys; line = b'[2026-01-01 00:00:00] Decode batch, #running-req: 4\\n'; "
    "sys.stdout.buffer.write(line * (24 * 1024 * 1024 // len(line)) + b'y' * 100_000 + b'\\n'); "
    "sys.stdout.flush(); import time; time.sleep(60)"
)


@pytest.fixture(scope="module")
def servers() -> Iterator[list[str]]:
    with SimFleet([ServerSpec("healthy"), ServerSpec("healthy")], speed=10.0) as fleet:
        yield fleet.urls


def _metric(text: str, name: str, target: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(f'{name}{{target="{target}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_lines_a_piped_log_drops_and_cuts_are_counted_on_targets_and_metrics(
    servers: list[str], daemon_factory
):
    # scrapes 3 s apart: the command's 24 MiB arrive well before the second one takes them
    config = {"scrape_interval_seconds": 3.0, "scrape_timeout_seconds": 1.0}
    targets = [
        {"url": servers[0], "name": "gpu-a", "log_command": [sys.executable, "-c", FLOOD]},
        {"url": servers[1], "name": "gpu-b"},
    ]
    daemon = daemon_factory({**config, "targets": targets})
    a = daemon.wait_for(
        lambda d: (t := d.get("/targets/gpu-a").json())["log_lines_cut_total"] == 1 and t, 40
    )
    assert a["log_lines_dropped_total"] > 0
    b = daemon.get("/targets/gpu-b").json()
    assert b["log_lines_dropped_total"] is None and b["log_lines_cut_total"] is None
    text = daemon.get("/metrics").text
    dropped = _metric(text, "sglang_tuner_log_lines_dropped_total", "gpu-a")
    assert dropped is not None and dropped >= a["log_lines_dropped_total"]
    assert _metric(text, "sglang_tuner_log_lines_dropped_total", "gpu-b") is None
    assert "dropped unread" in daemon.wait_for(lambda d: "dropped unread" in d.logs() and d.logs())
