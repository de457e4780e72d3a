"""Loading settings: the YAML file read, key files checked, every problem listed at once."""

from pathlib import Path

import pytest
from sglang_tuner.config.loading import load_settings, read_yaml
from sglang_tuner.config.problems import ConfigError

CATALOGUE = {"queue_empty": ("idle_ratio",), "scheduler_too_conservative": ()}


def _write(tmp_path: Path, text: str, name: str = "config.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _problems(path: Path | None, overrides=None, catalogue=None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_settings(path, overrides, catalogue)
    return info.value.problems


@pytest.mark.parametrize("text", ["", "\n\n", "# targets: to come\n"])
def test_load_settings_an_empty_file_says_where_to_start(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert info.value.problems == ["(top level): the file is empty (start from targets:)"]
    assert info.value.source == str(path)
    assert str(info.value).startswith(f"{path}: 1 problem(s)\n")


@pytest.mark.parametrize("text", ["just words\n", "- a\n- b\n", "42\n"])
def test_read_yaml_a_file_that_is_not_a_mapping_is_refused(tmp_path, text):
    with pytest.raises(ConfigError) as info:
        read_yaml(_write(tmp_path, text))
    assert info.value.problems == ["(top level): must be a mapping of settings"]


def test_read_yaml_says_why_a_file_cannot_be_read(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_yaml(tmp_path)  # a directory
    assert info.value.problems == ["cannot read: Is a directory"]
    with pytest.raises(ConfigError) as info:
        read_yaml(tmp_path / "nope.yml")
    assert info.value.problems == ["cannot read: No such file or directory"]


def test_read_yaml_invalid_yaml_names_the_line(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_yaml(_write(tmp_path, "targets:\n  - url: http://a:1\n  bad: [unclosed\n"))
    (problem,) = info.value.problems
    assert problem.startswith("not valid YAML at line ") and "http://a:1" not in problem


def test_read_yaml_error_never_quotes_the_line_a_password_is_on(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_yaml(_write(tmp_path, "targets:\n  - url: http://u:hunter2@a:1\n\tname: x\n"))
    (problem,) = info.value.problems
    assert problem.startswith("not valid YAML at line 3, column 1: ")
    assert "hunter2" not in problem


def test_load_settings_lists_each_targets_key_file_problem_with_its_path(tmp_path):
    good = _write(tmp_path, "s3cret\n", "good.key")
    empty = _write(tmp_path, "", "empty.key")
    two = _write(tmp_path, "s3cret\nhunter2\n", "two.key")
    targets = [
        {"url": "http://a:1", "api_key_file": str(good)},
        {"url": "http://b:1", "api_key_file": str(tmp_path / "missing.key")},
        {"url": "http://c:1"},
        {"url": "http://d:1", "api_key_file": str(empty)},
        {"url": "http://e:1", "api_key_file": str(two)},
    ]
    problems = _problems(None, {"targets": targets})
    assert problems == [
        f"targets[1].api_key_file: cannot read {tmp_path / 'missing.key'}: "
        "No such file or directory",
        f"targets[3].api_key_file: {empty} must hold the secret on one line (empty)",
        f"targets[4].api_key_file: {two} must hold the secret on one line (2 lines)",
    ]
    assert not any("s3cret" in p or "hunter2" in p for p in problems)


def test_load_settings_without_a_file_names_the_settings_as_the_source():
    with pytest.raises(ConfigError) as info:
        load_settings(None, {"window_seconds": -1})
    assert info.value.source == "settings"
    assert info.value.problems == ["window_seconds: Input should be greater than 0"]


def test_load_settings_lists_unknown_rules_beside_the_other_problems(tmp_path):
    path = _write(
        tmp_path,
        "scrape_interval_seconds: -1\n"
        "rules:\n"
        "  queue_emtpy: {enabled: false}\n"
        "  queue_empty: {thresholds: {idle_ratoi: 0.5}}\n",
    )
    problems = _problems(path, catalogue=CATALOGUE)
    assert problems == [
        "scrape_interval_seconds: Input should be greater than 0",
        "rules.queue_emtpy: unknown tuning rule; did you mean queue_empty?",
        "rules.queue_empty.thresholds.idle_ratoi: unknown threshold of queue_empty "
        "(known: idle_ratio)",
    ]


def test_load_settings_checks_rule_overrides_against_the_catalogue_only_when_given(tmp_path):
    path = _write(tmp_path, "rules:\n  scheduler_too_conservative: {thresholds: {x: 1}}\n")
    assert load_settings(path).rules["scheduler_too_conservative"].thresholds == {"x": 1.0}
    assert _problems(path, catalogue=CATALOGUE) == [
        "rules.scheduler_too_conservative.thresholds.x: unknown threshold of "
        "scheduler_too_conservative (known: none)"
    ]


def test_load_settings_flags_win_over_the_file_and_unset_flags_leave_it(tmp_path):
    path = _write(tmp_path, "window_seconds: 100\nmin_samples: 4\n")
    settings = load_settings(path, {"window_seconds": 200, "min_samples": None})
    assert (settings.window_seconds, settings.min_samples) == (200.0, 4)


def test_load_settings_environment_wins_over_the_file_and_its_problems_are_listed(
    tmp_path, monkeypatch
):
    path = _write(tmp_path, "min_samples: 4\nwindow_seconds: 100\n")
    monkeypatch.setenv("SGLANG_TUNER_MIN_SAMPLES", "9")
    assert load_settings(path).min_samples == 9
    monkeypatch.setenv("SGLANG_TUNER_WINDOW_SECONDS", "-5")
    assert _problems(path) == ["window_seconds: Input should be greater than 0"]


def test_load_settings_forgets_the_previous_file(tmp_path):
    load_settings(_write(tmp_path, "window_seconds: 100\n"))
    _problems(_write(tmp_path, "window_seconds: 100\nbogus: 1\n", "bad.yml"))
    assert load_settings(None).window_seconds == 300.0  # neither file leaks into the next load


def test_load_settings_lists_a_key_file_problem_beside_a_validation_problem(tmp_path):
    missing = tmp_path / "missing.key"
    path = _write(
        tmp_path,
        f"scrape_interval_seconds: -1\ntargets: [{{url: 'http://a:1', api_key_file: '{missing}'}}]",
    )
    problems = _problems(path)
    assert "scrape_interval_seconds: Input should be greater than 0" in problems
    assert any(p.startswith("targets[0].api_key_file: cannot read") for p in problems)


def test_a_misspelt_environment_variable_names_the_setting_meant():
    from sglang_tuner.config.loading import misspelt_variables

    environ = {
        "SGLANG_TUNER_SCRAPE_INTERVAL": "5s", "SGLANG_TUNER_PROMETHEUS_URL": "http://p",
        "SGLANG_TUNER_TARGETS": "http://a:1", "SGLANG_TUNER_SHARD__INDEX": "1",
        "SGLANG_TUNER_CONFIG_FILE": "c.yml", "SGLANG_TUNER_MY_API_KEY": "s3cret", "HOME": "/",
    }  # fmt: skip
    assert misspelt_variables(environ) == [
        "SGLANG_TUNER_PROMETHEUS_URL is no setting (ignored); did you mean "
        "SGLANG_TUNER_PROMETHEUS__URL?",
        "SGLANG_TUNER_SCRAPE_INTERVAL is no setting (ignored); did you mean "
        "SGLANG_TUNER_SCRAPE_INTERVAL_SECONDS?",
    ]


def _laughs(levels: int = 9) -> str:
    """YAML aliases nested in aliases: nine levels of nine lists are 387 million values."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "targets: [{url: 'http://gpu-1:30000'}]\n" + "\n".join(lines) + "\n"


def test_read_yaml_refuses_aliases_that_expand_past_a_million_values(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_yaml(_write(tmp_path, _laughs()))
    assert "expands to more than 1,000,000 values" in str(info.value)


def test_read_yaml_keeps_a_fleet_of_ten_thousand_targets_with_labels(tmp_path):
    targets = "".join(
        f"  - {{url: 'http://gpu-{i}:30000', labels: {{zone: a, rack: r{i % 40}}}}}\n"
        for i in range(10_000)
    )
    assert len(read_yaml(_write(tmp_path, "targets:\n" + targets))["targets"]) == 10_000
