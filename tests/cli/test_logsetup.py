"""Operator logs: text or one JSON object per line."""

import json
import logging

from sglang_tuner.cli.logsetup import configure_logging


def test_configure_logging_json_writes_one_object_per_line(capsys):
    configure_logging("info", "json")
    logging.getLogger("sglang_tuner.loop.tuner").warning(
        "target %s is down: %s", "gpu-a", "refused"
    )
    logging.getLogger("sglang_tuner.loop.tuner").debug("not shown at info")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["level"] == "warning"
    assert entry["logger"] == "sglang_tuner.loop.tuner"
    assert entry["message"] == "target gpu-a is down: refused"


def test_configure_logging_text_quiets_http_client_chatter(capsys):
    configure_logging("debug", "text")
    logging.getLogger("httpx").info("HTTP Request: GET http://x/metrics")
    logging.getLogger("sglang_tuner.loop.tuner").info("configuration reloaded")
    err = capsys.readouterr().err
    assert "configuration reloaded" in err and "HTTP Request" not in err


def test_configure_logging_json_gives_each_extra_field_its_own_key(capsys, tmp_path):
    configure_logging("info", "json")
    logging.getLogger("sglang_tuner.loop.transitions").warning(
        "target %s is down: %s",
        "gpu-a",
        "connection refused",
        extra={"target": "gpu-a", "reason": "refused", "file": tmp_path, "level": "ignored"},
    )
    entry = json.loads(capsys.readouterr().err)
    assert entry["target"] == "gpu-a" and entry["reason"] == "refused"
    assert entry["file"] == str(tmp_path)  # not JSON itself: written as text
    assert entry["level"] == "warning"  # an extra cannot hide one of ours
    assert entry["message"] == "target gpu-a is down: connection refused"


def test_configure_logging_json_without_extra_has_only_the_standard_fields(capsys):
    configure_logging("info", "json")
    logging.getLogger("sglang_tuner.loop.tuner").info("configuration reloaded")
    assert set(json.loads(capsys.readouterr().err)) == {"ts", "level", "logger", "message"}
