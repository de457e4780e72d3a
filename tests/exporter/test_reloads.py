"""ReloadStatus: the reload families as Prometheus and Alertmanager export theirs."""

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sglang_tuner.exporter.reloads import ReloadStatus


def _values(status: ReloadStatus) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(status)
    text = generate_latest(registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_start_counts_as_a_load_that_worked() -> None:
    assert _values(ReloadStatus(started_at=100.0)) == {
        "sglang_tuner_config_last_reload_successful": 1.0,
        "sglang_tuner_config_last_reload_success_timestamp_seconds": 100.0,
        "sglang_tuner_config_reload_failures_total": 0.0,
    }


def test_a_refused_reload_keeps_the_last_success_time_and_a_good_one_moves_it() -> None:
    status = ReloadStatus(started_at=100.0)
    status.record(False, 150.0)
    after_refusal = _values(status)
    assert after_refusal["sglang_tuner_config_last_reload_successful"] == 0.0
    assert after_refusal["sglang_tuner_config_last_reload_success_timestamp_seconds"] == 100.0
    assert after_refusal["sglang_tuner_config_reload_failures_total"] == 1.0
    status.record(True, 200.0)
    after_success = _values(status)
    assert after_success["sglang_tuner_config_last_reload_successful"] == 1.0
    assert after_success["sglang_tuner_config_last_reload_success_timestamp_seconds"] == 200.0
    assert after_success["sglang_tuner_config_reload_failures_total"] == 1.0  # a counter
