"""`sglang-tuner check`: a short watch from the terminal prints the advice."""

import json

from sglang_sim import ServerSpec, SimFleet
from sglang_tuner.__main__ import main

from tests.conftest import free_port


def test_check_prints_advice_for_a_too_conservative_server_and_survives_a_dead_one(capsys):
    with SimFleet([ServerSpec("scheduler_too_conservative")], seed=5, warmup_seconds=120) as fleet:
        dead = f"http://127.0.0.1:{free_port()}"
        code = main(["check", fleet.urls[0], dead, "--duration", "6", "--interval", "0.5"])
    out = capsys.readouterr().out
    assert code == 0
    assert "scheduler_too_conservative" in out
    assert "action:   --schedule-conservativeness 3 -> 0.3" in out  # computed, in one step
    assert "target is down" in out or "connection refused" in out


def test_check_json_format_and_exit_1_when_nothing_answers(capsys):
    code = main(["check", f"http://127.0.0.1:{free_port()}", "--duration", "2", "--interval", "0.5",
                 "--format", "json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["count"] == 0 and report["no_data"]
