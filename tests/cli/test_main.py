"""The command line: exit codes and messages a user sees."""

import pytest
from sglang_tuner import __version__
from sglang_tuner.__main__ import main
from sglang_tuner.rules import ALL_RULES


def test_main_version_prints_version(capsys):
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"sglang-tuner {__version__}"


def test_main_check_config_ok(tmp_path, capsys):
    path = tmp_path / "c.yml"
    path.write_text("targets: [{url: 'http://127.0.0.1:30000'}]\n")
    assert main(["check-config", str(path)]) == 0
    assert "OK (1 target(s)" in capsys.readouterr().out


def test_main_check_config_takes_the_file_as_run_does_too(tmp_path, capsys):
    path = tmp_path / "c.yml"
    path.write_text("targets: [{url: 'http://127.0.0.1:30000'}]\n")
    assert main(["check-config", "--config", str(path)]) == 0
    assert f"{path}: OK (1 target(s)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as neither:
        main(["check-config"])
    assert neither.value.code == 2
    assert "one of the arguments file --config is required" in capsys.readouterr().err


def test_main_check_config_lists_every_problem_and_exits_2(tmp_path, capsys):
    path = tmp_path / "c.yml"
    path.write_text(
        "targets: [{url: 'ftp://x'}]\nwindow_seconds: 0\nrules: {no_such_rule: {enabled: true}}\n"
    )
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "targets[0].url" in err and "window_seconds" in err


def test_main_check_config_unknown_rule_id_is_an_error(tmp_path, capsys):
    path = tmp_path / "c.yml"
    path.write_text("rules: {no_such_rule: {enabled: true}}\n")
    assert main(["check-config", str(path)]) == 2
    assert "rules.no_such_rule: unknown tuning rule" in capsys.readouterr().err


def test_main_rules_lists_every_rule(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    assert all(rule.id in out for rule in ALL_RULES)


def test_main_without_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "sglang-tuner run --config" in capsys.readouterr().out


def test_main_check_config_lists_schema_and_catalogue_problems_in_one_run(tmp_path, capsys):
    path = tmp_path / "c.yml"
    path.write_text(
        "window_seconds: 0\n"
        "rules:\n"
        "  no_such_rule: {enabled: true}\n"
        "  queue_too_long: {thresholds: {healty_queue_max: 5}}\n"
    )
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "3 problem(s)" in err
    assert "window_seconds" in err and "rules.no_such_rule: unknown tuning rule" in err
    assert "rules.queue_too_long.thresholds.healty_queue_max: unknown threshold" in err


def test_main_check_config_refuses_an_empty_file(tmp_path, capsys):
    path = tmp_path / "c.yml"
    path.write_text("# nothing yet\n")
    assert main(["check-config", str(path)]) == 2
    assert "the file is empty" in capsys.readouterr().err


def test_main_run_says_when_the_api_port_is_taken_and_exits_1(tmp_path, capsys):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "c.yml"
        config.write_text(
            f"targets: [{{url: 'http://127.0.0.1:1'}}]\nlisten_host: 127.0.0.1\n"
            f"listen_port: {port}\ndatabase: {tmp_path / 't.db'}\n"
        )
        assert main(["run", "--config", str(config)]) == 1
    assert f"could not listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_check_config_warns_of_a_misspelt_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SGLANG_TUNER_TARGET", "http://127.0.0.1:30000")
    path = tmp_path / "c.yml"
    path.write_text("targets: [{url: 'http://127.0.0.1:30000'}]\n")
    assert main(["check-config", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warning: SGLANG_TUNER_TARGET is no setting (ignored); did you mean " in err
    assert "SGLANG_TUNER_TARGETS?" in err
