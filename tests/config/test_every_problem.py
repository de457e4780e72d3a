"""Every problem of a configuration in one pass, in our words, with the key or value meant."""

from pathlib import Path

import pytest
from sglang_tuner.cli.main import main
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError

UNSET = "SGLANG_TUNER_TEST_UNSET_KEY"

TEN_MISTAKES = """\
scrape_intervall: 15s
window_seconds: 5 minutes
log_format: jsn
min_samples: many
targets:
  - url: http://gpu-1:30000
    profil: online
  - url: ftp://gpu-2
    log_file: /var/log/sglang.log
    log_command: [journalctl, -u, sglang, -f]
  - url: http://gpu-3:30000
    profile: onlin
    api_key_env: SGLANG_TUNER_TEST_UNSET_KEY
alertmanager:
  urls: [http://am:9093]
  basic_auth: {{username: ops, password_file: {missing}}}
"""


def _ten_mistakes(tmp_path: Path) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(TEN_MISTAKES.format(missing=tmp_path / "missing.pw"))
    return path


def _problems(path: Path | None = None, overrides: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_settings(path, overrides)
    return info.value.problems


def test_load_settings_ten_mistakes_in_several_sections_are_ten_problems_at_once(
    tmp_path, monkeypatch
):
    monkeypatch.delenv(UNSET, raising=False)
    problems = _problems(_ten_mistakes(tmp_path))
    assert sorted(problems) == sorted(
        [
            "scrape_intervall: unknown key; did you mean scrape_interval_seconds?",
            'window_seconds: "5 minutes" is not a duration (use e.g. 15s, 5m, 1h or seconds)',
            'log_format: "jsn" is not one of text, json; did you mean json?',
            "min_samples: Input should be a valid integer, unable to parse string as an integer",
            "targets[0].profil: unknown key; did you mean profile?",
            "targets[1].url: Value error, must be an http:// or https:// URL with a host",
            "targets[1]: Value error, give log_file or log_command, not both",
            'targets[2].profile: "onlin" is not one of offline, online, long_context, '
            "multi_turn; did you mean online?",
            f"targets[2].api_key_env: environment variable {UNSET} is unset or empty",
            f"alertmanager.basic_auth.password_file: cannot read {tmp_path / 'missing.pw'}: "
            "No such file or directory",
        ]
    )


@pytest.mark.parametrize("command", [["check-config"], ["run", "--config"]])
def test_main_check_config_and_run_list_the_ten_problems_alike(
    tmp_path, monkeypatch, capsys, command
):
    monkeypatch.delenv(UNSET, raising=False)
    path = _ten_mistakes(tmp_path)
    assert main([*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 10 problem(s)" in err
    assert "did you mean scrape_interval_seconds?" in err and UNSET in err


def test_load_settings_unknown_key_in_a_small_section_lists_the_known_ones():
    problems = _problems(None, {"alertmanager": {"tls": {"ca": "/etc/ca.pem"}}})
    assert problems == [
        "alertmanager.tls.ca: unknown key (known: ca_file, cert_file, key_file, "
        "insecure_skip_verify)"
    ]


def test_load_settings_unknown_key_far_from_every_known_one_is_just_unknown():
    assert _problems(None, {"zzz": 1}) == ["zzz: unknown key"]


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"rules": {"queue_empty": {"enabld": False}}}, "rules.queue_empty.enabld: unknown key; "),
        (
            {"rules": {"queue_empty": {"severity": "warn"}}},
            'rules.queue_empty.severity: "warn" is not one of info, warning, critical; did you '
            "mean warning?",
        ),
        (
            {"web_auth_exempt_paths": ["/helthz"]},
            'web_auth_exempt_paths[0]: "/helthz" is not one of /healthz, /readyz; did you mean '
            "/healthz?",
        ),
        (
            {"file_sd": [{"files": ["a.json"], "profile": "ofline"}]},
            'file_sd[0].profile: "ofline" is not one of offline, online, long_context, '
            "multi_turn; did you mean offline?",
        ),
        (
            {"prometheus": {"url": "http://p:9090", "selecter": 'job="x"'}},
            "prometheus.selecter: unknown key; did you mean selector?",
        ),
    ],
)
def test_load_settings_unknown_keys_and_values_name_the_one_meant(overrides, problem):
    (found,) = _problems(None, overrides)
    assert found.startswith(problem)


def test_load_settings_checks_across_fields_run_beside_field_problems():
    problems = _problems(
        None,
        {
            "scrape_interval_seconds": "2s",
            "scrape_timeout_seconds": "5s",
            "window_seconds": -1,
            "hold_for_seconds": "soon",
            "shard": {"index": 3, "count": 2, "indx": 1},
        },
    )
    assert sorted(problems) == [
        "(top level): Value error, scrape_timeout_seconds must be below scrape_interval_seconds",
        'hold_for_seconds: "soon" is not a duration (use e.g. 15s, 5m, 1h or seconds)',
        "shard.indx: unknown key; did you mean index?",
        "shard: Value error, index 3 must be below count 2",
        "window_seconds: Input should be greater than 0",
    ]


def test_load_settings_every_failing_check_across_fields_at_once():
    targets = [{"url": "http://a:1", "name": "x"}, {"url": "http://b:1", "name": "x"}]
    problems = _problems(
        None, {"targets": targets, "scrape_interval_seconds": 2, "scrape_timeout_seconds": 5}
    )
    assert problems == [
        "(top level): Value error, duplicate target name 'x'",
        "(top level): Value error, scrape_timeout_seconds must be below scrape_interval_seconds",
    ]


def test_load_settings_a_check_reading_an_invalid_field_waits_for_it():
    problems = _problems(None, {"scrape_interval_seconds": "soon", "scrape_timeout_seconds": 60})
    assert problems == [
        'scrape_interval_seconds: "soon" is not a duration (use e.g. 15s, 5m, 1h or seconds)'
    ]


def test_load_settings_service_files_are_read_beside_other_problems(tmp_path):
    two = tmp_path / "token"
    two.write_text("one\ntwo\n")
    problems = _problems(
        None,
        {
            "window_seconds": "forever",
            "alertmanager": {
                "bearer_token_file": str(two),
                "basic_auth": {"username": "u", "password_file": str(two)},
            },
        },
    )
    assert problems[0].startswith("window_seconds: ")
    assert problems[1:] == [
        f"alertmanager.basic_auth.password_file: {two} must hold the secret on one line (2 lines)",
        f"alertmanager.bearer_token_file: {two} must hold the secret on one line (2 lines)",
        "alertmanager: basic_auth and bearer_token_file are exclusive",
    ]


@pytest.mark.parametrize("value", [None, ""])
def test_load_settings_an_unset_or_empty_variable_is_a_problem_naming_it(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(UNSET, raising=False)
    else:
        monkeypatch.setenv(UNSET, value)
    problems = _problems(
        None,
        {
            "targets": [{"url": "http://a:1"}, {"url": "http://b:1", "api_key_env": UNSET}],
            "prometheus": {"url": "http://p:9090", "api_key_env": UNSET},
        },
    )
    assert problems == [
        f"targets[1].api_key_env: environment variable {UNSET} is unset or empty",
        f"prometheus.api_key_env: environment variable {UNSET} is unset or empty",
    ]


def test_load_settings_a_set_variable_is_accepted(monkeypatch):
    monkeypatch.setenv(UNSET, "s3cret")
    settings = load_settings(None, {"targets": [{"url": "http://a:1", "api_key_env": UNSET}]})
    assert settings.targets[0].api_key_env == UNSET


def test_load_settings_variables_named_by_targets_from_the_environment_are_checked(monkeypatch):
    monkeypatch.delenv(UNSET, raising=False)
    monkeypatch.setenv(
        "SGLANG_TUNER_TARGETS", f'[{{"url": "http://a:1", "api_key_env": "{UNSET}"}}]'
    )
    assert _problems() == [
        f"targets[0].api_key_env: environment variable {UNSET} is unset or empty"
    ]


def test_main_check_config_names_an_unset_variable(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(UNSET, raising=False)
    path = tmp_path / "config.yml"
    path.write_text(f"targets: [{{url: 'http://a:1', api_key_env: {UNSET}}}]\n")
    assert main(["check-config", str(path)]) == 2
    assert (
        f"targets[0].api_key_env: environment variable {UNSET} is unset" in capsys.readouterr().err
    )
    monkeypatch.setenv(UNSET, "s3cret")
    assert main(["check-config", str(path)]) == 0
