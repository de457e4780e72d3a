"""SimFleet: a warm start serves a busy server in its steady state from the first scrape."""

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sglang_sim import ServerSpec, SimFleet


def _token_usage(url: str) -> float:
    text = httpx.get(url + "/metrics").text
    for family in text_string_to_metric_families(text):
        if family.name == "sglang:token_usage":
            return family.samples[0].value
    raise AssertionError("no sglang:token_usage")


def test_fleet_warmup_starts_busy_server_with_a_full_pool():
    with SimFleet([ServerSpec("healthy"), ServerSpec("healthy")], seed=2) as cold:
        cold_usage = _token_usage(cold.urls[0])
    with SimFleet([ServerSpec("healthy")], seed=2, warmup_seconds=120.0) as warm:
        assert warm.sim_time() >= 120.0
        warm_usage = _token_usage(warm.urls[0])
    assert cold_usage < 0.5 < 0.9 < warm_usage
