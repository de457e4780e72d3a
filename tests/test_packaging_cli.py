"""No traps for a new user: --version, `run` with nothing to watch, a pasted /metrics URL,
`assets` export, and /docs that works without internet access."""

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.registry import CollectorRegistry
from sglang_sim import ServerSpec, SimFleet
from sglang_tuner import __version__
from sglang_tuner.__main__ import main
from sglang_tuner.api.app import create_app
from sglang_tuner.api.docs import STATIC_FILES, static_dir
from sglang_tuner.assets import collect
from sglang_tuner.cli.check import server_url
from sglang_tuner.config.loading import load_settings
from sglang_tuner.evaluation import TunerState
from sglang_tuner.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent


def test_version_flag_prints_the_version(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"sglang-tuner {__version__}"


def test_run_without_config_or_targets_exits_2_and_says_what_to_do(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("SGLANG_TUNER_TARGETS", raising=False)
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert "nothing to watch (no --config given)" in err
    assert "--config" in err and "SGLANG_TUNER_TARGETS" in err


def test_run_with_a_config_without_targets_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("SGLANG_TUNER_TARGETS", raising=False)
    config = tmp_path / "empty.yml"
    config.write_text("listen_port: 9999\n")
    assert main(["run", "--config", str(config)]) == 2
    assert f"nothing to watch ({config})" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("pasted", "server"),
    [
        ("http://gpu-1:30000/metrics", "http://gpu-1:30000"),
        ("http://gpu-1:30000/metrics/", "http://gpu-1:30000"),
        ("https://gpu-1:30000/get_server_info?x=1", "https://gpu-1:30000"),
        ("http://gpu-1:30000/v1/chat/completions", "http://gpu-1:30000"),
        ("gpu-1:30000", "http://gpu-1:30000"),
        ("http://gateway/sglang-a/metrics", "http://gateway/sglang-a"),  # a proxy's path prefix
    ],
)
def test_check_url_pasted_from_prometheus_means_the_server(pasted: str, server: str):
    url, note = server_url(pasted)
    assert url == server
    assert note == f"{pasted} -> watching the server {server}"


def test_check_url_already_a_server_has_no_note():
    assert server_url("http://gpu-1:30000/") == ("http://gpu-1:30000", None)


@pytest.mark.parametrize("bad", ["ftp://gpu-1/metrics", "http://", "http://gpu 1:30000"])
def test_check_refuses_what_is_no_server_url_with_the_fix(bad: str, capsys):
    assert main(["check", bad, "--duration", "1"]) == 2
    assert "give one like http://gpu-1:30000" in capsys.readouterr().err


def test_check_with_a_metrics_url_scrapes_the_server(capsys: pytest.CaptureFixture[str]):
    with SimFleet([ServerSpec("healthy")], seed=1, warmup_seconds=30) as fleet:
        code = main(["check", f"{fleet.urls[0]}/metrics", "--duration", "2", "--interval", "0.5"])
    captured = capsys.readouterr()
    assert code == 0
    assert f"-> watching the server {fleet.urls[0]}" in captured.err
    assert "target is down" not in captured.out


def test_assets_list_names_every_shipped_file(capsys: pytest.CaptureFixture[str]):
    assert main(["assets", "list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == collect(ROOT)
    for expected in ("alerts/sglang-tuner.rules.yml", "alerts/sglang-tuner.rules.test.yml",
                     "dashboards/sglang-tuner-overview.json", "deploy/sglang-tuner.service",
                     "dashboards/provisioning/datasources/prometheus.yml",
                     "deploy/config.example.yaml"):  # fmt: skip
        assert expected in listed


def test_assets_export_keeps_a_changed_file_unless_forced(tmp_path: Path, capsys):
    assert main(["assets", "export", str(tmp_path)]) == 0
    assert capsys.readouterr().out.count("wrote ") == len(collect(ROOT))
    edited = tmp_path / "deploy" / "config.example.yaml"
    edited.write_text("targets: []  # mine\n")
    (tmp_path / "alerts" / "sglang-tuner.rules.yml").unlink()
    assert main(["assets", "export", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{edited} exists and differs" in err and "use --force" in err
    assert edited.read_text() == "targets: []  # mine\n"
    assert not (tmp_path / "alerts" / "sglang-tuner.rules.yml").exists()  # nothing written
    assert main(["assets", "export", str(tmp_path), "--force"]) == 0
    out = capsys.readouterr().out
    assert f"overwrote {edited}" in out and "already up to date" in out
    assert edited.read_bytes() == (ROOT / "deploy" / "config.example.yaml").read_bytes()


def test_assets_export_into_an_unwritable_place_is_a_clear_error(tmp_path: Path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["assets", "export", str(blocker / "sub")]) == 1
    assert capsys.readouterr().err.startswith("error: cannot write")


@pytest.fixture
def client() -> TestClient:
    settings = load_settings(None, {})
    app = create_app(TunerState(), CollectorRegistry(), rules=ALL_RULES, settings=settings)
    return TestClient(app)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_their_scripts_from_the_app_not_a_cdn(client: TestClient, page: str):
    html = client.get(page)
    assert html.status_code == 200
    assert "://" not in html.text  # no CDN, no absolute URL at all
    urls = re.findall(r'(?:src|href)="([^"]+)"', html.text) + re.findall(
        r"(?:url|src): *'([^']+)'", html.text
    )
    assert urls and all(u.startswith("/") for u in urls), urls
    scripts = [u for u in urls if u.endswith(".js")]
    assert scripts
    for url in scripts:
        response = client.get(url)
        assert response.status_code == 200, url
        assert "javascript" in response.headers["content-type"]
        assert len(response.content) > 100_000  # the real bundle, not a stub


def test_docs_static_files_are_installed():
    for name in STATIC_FILES:
        assert (static_dir() / name).stat().st_size > 1000, name
