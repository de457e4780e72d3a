"""Targets from the config and from Prometheus file_sd files."""

import json
import os

from sglang_tuner.config.discovery import FileSD, merge_targets, static_targets
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.target_settings import FileSDSettings
from sglang_tuner.model.target_spec import TargetSpec


def test_static_targets_reads_api_key_from_file_and_env(tmp_path, monkeypatch):
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    monkeypatch.setenv("GPU2_KEY", "from-env")
    settings = load_settings(
        None,
        {
            "targets": [
                {"url": "http://gpu-1:30000", "api_key_file": str(key), "guide_version": "legacy"},
                {"url": "http://gpu-2:30000", "name": "b", "api_key_env": "GPU2_KEY"},
            ]
        },
    )
    first, second = static_targets(settings)
    assert (first.name, first.token, first.legacy_guide) == ("gpu-1:30000", "s3cret", True)
    assert (second.name, second.token) == ("b", "from-env")
    assert "s3cret" not in repr(first)


def test_file_sd_reads_json_and_yaml_with_labels_and_profile(tmp_path):
    (tmp_path / "a.json").write_text(
        json.dumps([{"targets": ["10.0.0.1:30000"], "labels": {"zone": "a", "profile": "online"}}])
    )
    (tmp_path / "b.yml").write_text("- targets: ['10.0.0.2:30000']\n")
    sd = FileSD([FileSDSettings(files=[str(tmp_path / "*.json"), str(tmp_path / "*.yml")])])
    targets, changed = sd.refresh()
    assert changed
    by_name = {t.name: t for t in targets}
    assert by_name["10.0.0.1:30000"].url == "http://10.0.0.1:30000"
    assert by_name["10.0.0.1:30000"].profile == "online"
    assert by_name["10.0.0.1:30000"].labels == {"zone": "a"}
    assert by_name["10.0.0.2:30000"].profile is None  # unset: inferred from the traffic


def test_file_sd_refresh_reports_change_only_when_a_file_changes(tmp_path):
    path = tmp_path / "sd.json"
    path.write_text(json.dumps([{"targets": ["h:1"]}]))
    sd = FileSD([FileSDSettings(files=[str(path)])])
    assert sd.refresh()[1]
    assert not sd.refresh()[1]
    path.write_text(json.dumps([{"targets": ["h:1", "h:2"]}]))
    os.utime(path, (1, 1))  # a distinct mtime even within the filesystem's resolution
    targets, changed = sd.refresh()
    assert changed and [t.name for t in targets] == ["h:1", "h:2"]


def test_file_sd_broken_file_keeps_previous_targets(tmp_path):
    path = tmp_path / "sd.json"
    path.write_text(json.dumps([{"targets": ["h:1"]}]))
    sd = FileSD([FileSDSettings(files=[str(path)])])
    sd.refresh()
    path.write_text("{not a list")
    os.utime(path, (2, 2))
    targets, _ = sd.refresh()
    assert [t.name for t in targets] == ["h:1"]


def test_file_sd_removed_file_drops_its_targets(tmp_path):
    path = tmp_path / "sd.json"
    path.write_text(json.dumps([{"targets": ["h:1"]}]))
    sd = FileSD([FileSDSettings(files=[str(tmp_path / "*.json")])])
    sd.refresh()
    path.unlink()
    targets, changed = sd.refresh()
    assert changed and targets == []


def test_merge_targets_static_wins_over_discovered_with_same_name():
    static = [TargetSpec("h:1", "http://h:1", profile="online")]
    discovered = [TargetSpec("h:1", "http://h:1"), TargetSpec("h:2", "http://h:2")]
    merged = merge_targets(static, discovered)
    assert [(t.name, t.profile) for t in merged] == [("h:1", "online"), ("h:2", None)]


def test_file_sd_emoji_names_as_json_dumps_writes_them_and_bad_ports_skipped(caplog):
    import json

    from sglang_tuner.config.discovery import parse_file_sd
    from sglang_tuner.config.target_settings import FileSDSettings

    doc = json.dumps([
        {"targets": ["10.0.0.1:30000", "10.0.0.2:99999"], "labels": {"team": "rocket 🚀"}},
    ])  # fmt: skip
    targets = parse_file_sd(doc, FileSDSettings(files=["x.json"]))
    assert [(t.name, t.labels["team"]) for t in targets] == [("10.0.0.1:30000", "rocket 🚀")]
    assert "10.0.0.2:99999 skipped" in caplog.text and "bad port" in caplog.text


def test_file_sd_log_lines_carry_the_file_target_and_reason_as_fields(tmp_path, caplog):
    from sglang_tuner.config.discovery import parse_file_sd

    parse_file_sd('[{"targets": ["10.0.0.2:99999"]}]', FileSDSettings(files=["x.json"]))
    (skipped,) = caplog.records
    assert (skipped.target, skipped.file_sd_group) == ("10.0.0.2:99999", 0)
    assert "bad port" in skipped.reason
    caplog.clear()
    path = tmp_path / "sd.json"
    path.write_text("{not a list")
    FileSD([FileSDSettings(files=[str(path)])]).refresh()
    (broken,) = caplog.records
    assert broken.file_sd == str(path) and "list" in broken.reason
