"""Settings: YAML + environment + flags; every problem listed with its YAML path."""

from pathlib import Path

import pytest
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(text)
    return path


def test_load_settings_defaults_match_design():
    s = load_settings(None)
    assert s.scrape_interval_seconds == 5.0
    assert s.scrape_timeout_seconds == 3.0
    assert s.max_body_bytes == 16 * 1024 * 1024
    assert s.window_seconds == 300.0
    assert s.frequently_ratio == 0.5
    assert s.hold_for_seconds == 120.0
    assert s.keep_firing_for_seconds == 300.0
    assert (s.listen_host, s.listen_port) == ("0.0.0.0", 9877)


def test_load_settings_reads_yaml_targets_and_rule_overrides(tmp_path):
    path = _write(
        tmp_path,
        """
targets:
  - url: http://gpu-1:30000/
    profile: online
    labels: {cluster: a}
rules:
  scheduler_too_conservative: {frequently_ratio: 0.6, thresholds: {token_usage_target: 0.85}}
""",
    )
    s = load_settings(path)
    assert s.targets[0].url == "http://gpu-1:30000"
    assert s.targets[0].target_name == "gpu-1:30000"
    assert s.targets[0].profile == "online"
    assert s.rules["scheduler_too_conservative"].thresholds == {"token_usage_target": 0.85}


def test_load_settings_lists_every_problem_with_yaml_path(tmp_path):
    path = _write(
        tmp_path,
        """
scrape_interval_seconds: -1
targets:
  - url: http://ok:1
  - url: ftp://bad
    profile: batch
  - {name: x}
unknown_key: 1
""",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    problems = "\n".join(info.value.problems)
    assert "scrape_interval_seconds:" in problems
    assert "targets[1].url:" in problems
    assert "targets[1].profile:" in problems
    assert "targets[2].url: Field required" in problems
    assert "unknown_key:" in problems
    assert len(info.value.problems) == 5


def test_load_settings_rejects_duplicate_target_names(tmp_path):
    path = _write(tmp_path, "targets: [{url: 'http://a:1', name: x}, {url: 'http://b:1', name: x}]")
    with pytest.raises(ConfigError, match="duplicate target name 'x'"):
        load_settings(path)


def test_load_settings_rejects_timeout_not_below_interval():
    with pytest.raises(ConfigError, match="scrape_timeout_seconds must be below"):
        load_settings(None, {"scrape_interval_seconds": 2, "scrape_timeout_seconds": 2})


def test_load_settings_bad_yaml_and_missing_file_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(_write(tmp_path, "targets: [unclosed"))
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(tmp_path / "nope.yml")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_settings(_write(tmp_path, "- a\n- b\n"))


def test_settings_environment_overrides_yaml(tmp_path, monkeypatch):
    path = _write(tmp_path, "window_seconds: 100\n")
    monkeypatch.setenv("SGLANG_TUNER_WINDOW_SECONDS", "600")
    monkeypatch.setenv("SGLANG_TUNER_ALERTMANAGER__RESEND_DELAY_SECONDS", "30")
    s = load_settings(path)
    assert s.window_seconds == 600.0
    assert s.alertmanager.resend_delay_seconds == 30.0


def test_settings_flags_override_environment(monkeypatch):
    monkeypatch.setenv("SGLANG_TUNER_LISTEN_PORT", "1111")
    assert load_settings(None, {"listen_port": 2222}).listen_port == 2222


def test_target_url_must_be_the_base_url_with_a_valid_port(tmp_path):
    path = _write(
        tmp_path,
        """
targets:
  - url: http://gpu-1:30000/metrics
  - url: http://gpu-2:99999
  - url: http://
""",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    problems = "\n".join(info.value.problems)
    assert (
        "targets[0].url: Value error, give the server's base URL (http://gpu-1:30000)" in problems
    )
    assert "targets[1].url: Value error, bad port" in problems
    assert "targets[2].url: Value error, must be an http:// or https:// URL with a host" in problems


def test_a_password_in_a_target_url_never_reaches_its_name_or_errors(tmp_path):
    s = load_settings(_write(tmp_path, "targets: [{url: 'http://ops:hunter2@gpu-1:30000'}]"))
    assert s.targets[0].target_name == "gpu-1:30000"
    with pytest.raises(ConfigError) as info:
        load_settings(
            _write(tmp_path, "targets: [{url: 'http://ops:hunter2@gpu-1:30000/metrics'}]")
        )
    assert "hunter2" not in "\n".join(info.value.problems)


def test_label_names_must_be_prometheus_label_names(tmp_path):
    path = _write(
        tmp_path, "targets: [{url: 'http://a:1', labels: {ok_name: x, bad-name: y, __x: z}}]"
    )
    with pytest.raises(ConfigError, match="not a valid label name: 'bad-name', '__x'"):
        load_settings(path)


def test_api_key_file_is_checked_at_load_and_must_be_one_line(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    s = load_settings(_write(tmp_path, f"targets: [{{url: 'http://a:1', api_key_file: '{key}'}}]"))
    assert s.targets[0].api_key_file == key
    key.write_text("s3cret\nsecond line\n")
    with pytest.raises(ConfigError, match="one line \\(2 lines\\)") as info:
        load_settings(_write(tmp_path, f"targets: [{{url: 'http://a:1', api_key_file: '{key}'}}]"))
    assert "s3cret" not in "\n".join(info.value.problems)
    missing = tmp_path / "missing"
    with pytest.raises(ConfigError, match="cannot read .*missing"):
        load_settings(
            _write(tmp_path, f"targets: [{{url: 'http://a:1', api_key_file: '{missing}'}}]")
        )


def test_alertmanager_url_port_is_checked():
    with pytest.raises(ConfigError, match="alertmanager.urls.*bad port"):
        load_settings(None, {"alertmanager": {"urls": ["http://am:70000"]}})


def test_scrape_limits_default_globally_and_a_target_overrides_only_what_it_sets(tmp_path):
    from sglang_tuner.config.discovery import static_targets
    from sglang_tuner.model.scrape import ScrapeLimits

    path = _write(
        tmp_path,
        """
label_limit: 64
targets:
  - {url: "http://gpu-1:30000", sample_limit: 100}
  - {url: "http://gpu-2:30000"}
""",
    )
    s = load_settings(path)
    assert s.scrape_limits == ScrapeLimits(sample_limit=50_000, label_limit=64)
    assert [t.limits for t in static_targets(s)] == [{"sample_limit": 100}, {}]
    with pytest.raises(ConfigError, match=r"targets\[0\].sample_limit"):
        load_settings(_write(tmp_path, "targets: [{url: 'http://a:1', sample_limit: -1}]"))


def test_standard_input_can_be_one_targets_log_only(tmp_path):
    text = "targets: [{url: 'http://a:1', log_file: '-'}, {url: 'http://b:1', log_file: '-'}]"
    with pytest.raises(ConfigError, match=r"standard input\) is set on 2 targets \(a:1, b:1\)"):
        load_settings(_write(tmp_path, text))
    assert load_settings(_write(tmp_path, "targets: [{url: 'http://a:1', log_file: '-'}]"))
