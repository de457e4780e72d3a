"""Service levels in the config: per target and per profile, durations written as every duration
setting is; a bad value is a clear error at its YAML path, with every other problem."""

from pathlib import Path

import pytest
from sglang_tuner.config.discovery import static_targets
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.model.service_levels import ServiceLevels


def _load(tmp_path: Path, text: str):
    path = tmp_path / "config.yml"
    path.write_text(text)
    return load_settings(path)


def test_a_targets_levels_take_durations_and_reach_its_spec(tmp_path):
    settings = _load(
        tmp_path,
        """
targets:
  - url: http://gpu-1:30000
    profile: online
    service_levels: {ttft_p99_seconds: 2s, itl_p50_seconds: 50ms, itl_p99_seconds: 0.2,
                     min_tokens_per_s: 1500}
  - url: http://gpu-2:30000
""",
    )
    first, second = static_targets(settings)
    assert first.service_levels == ServiceLevels(2.0, 0.05, 0.2, 1500.0)
    assert second.service_levels is None  # its profile's levels


def test_each_profiles_levels_are_set_over_the_builtin_ones(tmp_path):
    settings = _load(tmp_path, "service_levels:\n  online: {itl_p50_seconds: 40ms}\n")
    assert settings.profile_levels == {"online": ServiceLevels(itl_p50_seconds=0.04)}


def test_profile_levels_from_the_environment(monkeypatch):
    monkeypatch.setenv("SGLANG_TUNER_SERVICE_LEVELS__LONG_CONTEXT__TTFT_P99_SECONDS", "10s")
    settings = load_settings(None)
    assert settings.profile_levels == {"long_context": ServiceLevels(ttft_p99_seconds=10.0)}


def test_bad_levels_are_each_a_clear_error_at_their_yaml_path(tmp_path):
    with pytest.raises(ConfigError) as info:
        _load(
            tmp_path,
            """
targets:
  - url: http://gpu-1:30000
    service_levels: {itl_p50_seconds: fast, ttft_p99_seconds: 0s, min_tokens_per_s: -1}
  - url: http://gpu-2:30000
    service_levels: {itl_p50_seconds: 300ms, itl_p99_seconds: 200ms}
  - url: http://gpu-3:30000
    service_levels: {itl_p50: 50ms}
service_levels:
  batch: {itl_p50_seconds: 40ms}
""",
        )
    assert sorted(info.value.problems) == sorted([
        'targets[0].service_levels.itl_p50_seconds: "fast" is not a duration (use e.g. 15s, '
        "5m, 1h or seconds)",
        "targets[0].service_levels.ttft_p99_seconds: Input should be greater than 0",
        "targets[0].service_levels.min_tokens_per_s: Input should be greater than or equal to 0",
        "targets[1].service_levels: Value error, itl_p50_seconds (300 ms) is above "
        "itl_p99_seconds (200 ms): a median cannot exceed the 99th percentile",
        "targets[2].service_levels.itl_p50: unknown key; did you mean itl_p50_seconds?",
        "service_levels.batch: unknown key (known: offline, online, long_context, multi_turn)",
    ])  # fmt: skip
