"""No secret anywhere: a password in a target URL, a server's API key, Alertmanager's basic-auth
password never appear in an API answer, `/metrics`, the log (at debug level), the SQLite files
or the alerts Alertmanager holds."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sglang_sim import ServerSpec, SimFleet

from tests.alertmanager_process import Alertmanager
from tests.conftest import DaemonProcess

URL_PASSWORD = "url-pass-8c1f"
API_KEY = "sk-server-key-5d2e"
AM_PASSWORD = "am-pass-93ab"
SECRETS = (URL_PASSWORD, API_KEY, AM_PASSWORD)
pytestmark = pytest.mark.integration


@pytest.fixture
def servers() -> Iterator[SimFleet]:
    specs = [ServerSpec("retraction_storm", api_key=API_KEY), ServerSpec("healthy")]
    with SimFleet(specs, speed=10.0, warmup_seconds=300.0) as fleet:
        yield fleet


def _everything(daemon: DaemonProcess) -> str:
    """Every GET route's answer (JSON and text), /metrics and the docs, as one string."""
    paths = list(daemon.get("/openapi.json").json()["paths"])
    names = [t["name"] for t in daemon.get("/targets").json()["data"]]
    rules = [r["id"] for r in daemon.get("/rules").json()["data"]]
    out = []
    for path in paths:
        filled = path.replace("{target}", names[0]).replace("{rule}", rules[0])
        filled = filled.replace("{name}", rules[0])
        for query in ("", "?format=text", "?no_data=full"):
            out.append(daemon.get(filled + query).text)
    return "\n".join(out)


def test_no_secret_in_answers_metrics_logs_database_or_alerts(
    servers: SimFleet, alertmanager: Alertmanager, tmp_path: Path
):
    keyed, plain = servers.urls
    (tmp_path / "key").write_text(API_KEY + "\n")
    (tmp_path / "am-pass").write_text(AM_PASSWORD + "\n")
    config = {
        "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
        "evaluation_interval_seconds": 0.5, "window_seconds": 10.0, "min_samples": 6,
        "hold_for_seconds": 0.0, "log_level": "debug",
        "targets": [
            {"url": keyed, "api_key_file": str(tmp_path / "key")},
            {"url": plain.replace("http://", f"http://ops:{URL_PASSWORD}@")},
        ],
        "alertmanager": {
            "urls": [alertmanager.url.replace("http://", f"http://ops:{AM_PASSWORD}@")],
            "basic_auth": {"username": "ops", "password_file": str(tmp_path / "am-pass")},
        },
    }  # fmt: skip
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        daemon.wait_for(
            lambda d: (
                all(t["server_args"] for t in d.get("/targets").json()["data"])
                and d.get("/advice").json()["data"]
            ),
            timeout=60,
        )
        answers = _everything(daemon)
    finally:
        daemon.stop()
    files = b"".join(p.read_bytes() for p in tmp_path.glob("tuner.db*"))
    alerts = httpx.get(f"{alertmanager.url}/api/v2/alerts", timeout=5).text
    for secret in SECRETS:
        assert secret not in answers
        assert secret not in daemon.logs()
        assert secret.encode() not in files
        assert secret not in alerts
    assert "ops@" not in answers + daemon.logs()  # no userinfo left half-redacted


PLANTED = "hf_planted_token_7731"


def _plant(obj: object) -> object:
    """A copy of a /server_info body with a credential in every string field, the ways a real
    one carries them: a token in a URL's query, a password in a URL's userinfo."""
    if isinstance(obj, dict):
        return {k: _plant(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plant(v) for v in obj]
    if isinstance(obj, str):
        return f"https://ops:{PLANTED}@hub.example/{obj}?token={PLANTED}&rev=main"
    return obj


def test_no_secret_planted_in_any_server_info_field_reaches_any_output(tmp_path: Path):
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "sglang"
    info = json.dumps(_plant(json.loads((fixtures / "server_info" / "v0.5.17.json").read_text())))
    page = (fixtures / "v0.5.17_a.prom").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = page if self.path.startswith("/metrics") else info.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = {
        "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
        "evaluation_interval_seconds": 0.5, "window_seconds": 10.0, "min_samples": 3,
        "log_level": "debug",
        "targets": [{"url": f"http://127.0.0.1:{server.server_address[1]}", "name": "planted"}],
    }  # fmt: skip
    daemon = DaemonProcess(tmp_path, config).start()
    try:
        daemon.wait_for(
            lambda d: any(t["server_args"] for t in d.get("/targets").json()["data"]), timeout=30
        )
        answers = _everything(daemon)
    finally:
        daemon.stop()
        server.shutdown()
    files = b"".join(p.read_bytes() for p in tmp_path.glob("tuner.db*"))
    assert "hub.example" in answers  # the planted fields are shown, with the token taken out
    assert PLANTED not in answers
    assert PLANTED not in daemon.logs()
    assert PLANTED.encode() not in files
