"""The API fuzzed from its own `/openapi.json` (schemathesis) on a real daemon over HTTP: any
path, query and header the schema allows, and values it does not, never give a 5xx or a
traceback in a body."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from sglang_sim import ServerSpec, SimFleet

from tests.conftest import DaemonProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    specs = [ServerSpec("retraction_storm"), ServerSpec("healthy")]
    with SimFleet(specs, speed=10.0, warmup_seconds=300.0) as fleet:
        tmp: Path = tmp_path_factory.mktemp("fuzz")
        config = {
            "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
            "window_seconds": 15.0, "min_samples": 6, "hold_for_seconds": 0.0,
            "targets": [{"url": u, "name": n} for u, n in zip(fleet.urls, "ab", strict=True)],
        }  # fmt: skip
        daemon = DaemonProcess(tmp, config).start()
        try:
            daemon.wait_for(lambda d: d.get("/advice").json()["data"], timeout=60)
            yield schemathesis.openapi.from_url(f"{daemon.url}/openapi.json")
        finally:
            daemon.stop()


def test_no_request_gets_a_5xx_or_a_traceback(api_schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10  # /advice, /targets, /changes, /rules, ... all fuzzed
    statuses: list[int] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=20, deadline=None, database=None,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        def check(case: schemathesis.Case) -> None:
            response = case.call(timeout=10)
            statuses.append(response.status_code)
            assert response.status_code < 500, (case.path, case.query, response.text[:500])
            assert "Traceback" not in response.text and 'File "' not in response.text

        check()
    assert len(statuses) >= 5 * len(operations) and 200 in statuses and 404 in statuses
