"""The exported info families' labels: a target's join labels, an advice's texts and change."""

from sglang_tuner.evaluation import TargetStatus
from sglang_tuner.exporter.labels import advice_labels, change_labels, runbook_url, target_info
from sglang_tuner.model.advice import Action, Advice, Confidence, Severity
from sglang_tuner.model.server_config import ServerConfig


def _advice(action: Action) -> Advice:
    return Advice(
        "gpu-a",
        "queue_empty",
        Severity.INFO,
        "pending",
        0.0,
        "The queue is empty.",
        "e",
        action,
        "Tuning / queue",
        Confidence.LOW,
    )


def test_target_info_joins_the_target_to_its_instance_model_and_version():
    status = TargetStatus(
        "gpu-a",
        "http://10.0.0.1:30000",
        "online",
        labels={"cluster": "eu-1"},
        sglang_version="0.5.9",
        config=ServerConfig(model_path="meta-llama/Llama-3.1-8B"),
    )
    assert target_info(status) == {
        "cluster": "eu-1",
        "sglang_version": "0.5.9",
        "profile": "online",
        "instance": "10.0.0.1:30000",
        "model_name": "meta-llama/Llama-3.1-8B",
    }


def test_target_info_says_unknown_for_what_the_server_has_not_told():
    never_read = TargetStatus("gpu-b", "https://gpu-b:443", "offline")
    no_model = TargetStatus("gpu-c", "http://gpu-c:1", "offline", config=ServerConfig())
    for status in (never_read, no_model):
        info = target_info(status)
        assert (info["sglang_version"], info["model_name"]) == ("unknown", "unknown")
    assert target_info(never_read)["instance"] == "gpu-b:443"


def test_target_info_instance_never_carries_credentials():
    status = TargetStatus("gpu-a", "http://ops:hunter2@gpu-a:30000", "offline")
    assert target_info(status)["instance"] == "gpu-a:30000"


def test_target_info_our_labels_win_over_the_targets_own():
    labels = {"profile": "x", "team": "y"}
    status = TargetStatus("gpu-a", "http://gpu-a:1", "offline", labels=labels)
    info = target_info(status)
    assert (info["profile"], info["team"]) == ("offline", "y")


def test_advice_labels_carry_the_texts_and_the_change():
    action = Action("--max-running-requests 512 -> 256", "--max-running-requests", "512", "256")
    assert advice_labels(_advice(action), "http://tuner:9877/") == {
        "severity": "info",
        "state": "pending",
        "summary": "The queue is empty.",
        "action": "--max-running-requests 512 -> 256",
        "source": "Tuning / queue",
        "confidence": "low",
        "runbook_url": "http://tuner:9877/runbook/queue_empty",
        "flag": "--max-running-requests",
        "current": "512",
        "suggested": "256",
    }


def test_change_labels_are_empty_strings_for_advice_that_is_no_flag_change():
    assert change_labels(Action("add more GPUs")) == {"flag": "", "current": "", "suggested": ""}
    unknown = Action("--tp-size ? -> 2", "--tp-size", None, "2")
    assert change_labels(unknown) == {"flag": "--tp-size", "current": "", "suggested": "2"}


def test_runbook_url_joins_with_one_slash():
    assert runbook_url("http://t:1", "oom") == runbook_url("http://t:1/", "oom")
    assert runbook_url("http://t:1/", "oom") == "http://t:1/runbook/oom"
