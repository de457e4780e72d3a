"""Target names and label values with quotes, backslashes and newlines: the daemon's `/metrics`
still parses (`promtool check metrics`), and `/advice` carries them unchanged."""

import shutil
import subprocess
from collections.abc import Iterator

import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess

ODD = 'gpu "a" \\ node\nrack-1'
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with SimFleet([ServerSpec("retraction_storm")], speed=10.0, warmup_seconds=300.0) as fleet:
        yield fleet.urls[0]


def test_odd_names_and_labels_keep_metrics_valid_and_advice_intact(server: str, tmp_path):
    config = {
        "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
        "evaluation_interval_seconds": 0.5, "window_seconds": 15.0, "min_samples": 6,
        "hold_for_seconds": 0.0,
        "targets": [{"url": server, "name": ODD, "labels": {"team": ODD, "zone": "eu\\1"}}],
    }  # fmt: skip
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        advice = daemon.wait_for(lambda d: d.get("/advice").json()["data"], timeout=60)
        body = daemon.get("/metrics").content
    finally:
        daemon.stop()
    assert {a["target"] for a in advice} == {ODD}
    assert all(a["labels"].get("team") == ODD for a in advice)
    # the exposition escapes them: \" \\ \n inside label values
    assert b'target="gpu \\"a\\" \\\\ node\\nrack-1"' in body
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, timeout=30
    )
    problems = check.stderr.decode()
    # promtool exits 1 for lint hints too; a parse error is what must never happen
    assert "error while linting" not in problems and "parse" not in problems.lower(), problems
