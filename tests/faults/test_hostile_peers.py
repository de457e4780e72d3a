"""Peers as untrusted, against a real daemon process: a Model Gateway whose page lists workers
on other hosts, with `user:password@` in their URLs, or far too many of them. Real HTTP servers
on 127.0.0.1 stand for the gateway and its workers and record what they are sent."""

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
API_KEY = "sk-gateway-key-41f7"
WORKER_PASSWORD = "worker-pass-6a0c"
FAST = {"scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4}


class Peer:
    """A 127.0.0.1 HTTP server answering GETs from `pages`, recording each request's headers."""

    def __init__(self, pages: dict[str, Callable[[], bytes]]) -> None:
        self.pages, self.seen = pages, []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                del args

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                peer.seen.append((self.path, dict(self.headers)))
                page = peer.pages.get(self.path)
                body = page() if page else b"{}"
                self.send_response(200 if page else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.http.server_port
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def authorizations(self) -> list[str]:
        return [h.get("Authorization", "") for _, h in self.seen]

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def peers() -> Iterator[Callable[[dict[str, Callable[[], bytes]]], Peer]]:
    started: list[Peer] = []

    def start(pages: dict[str, Callable[[], bytes]]) -> Peer:
        started.append(Peer(pages))
        return started[-1]

    yield start
    for peer in started:
        peer.close()


def _page(workers: list[str]) -> bytes:
    lines = ["# TYPE sglang_num_running_reqs gauge"]
    lines += [f'sglang_num_running_reqs{{worker_addr="{w}"}} 3' for w in workers]
    return ("\n".join(lines) + "\n").encode()


def _server_info() -> bytes:
    return json.dumps({"version": "0.5.5", "tp_size": 1}).encode()


def test_the_gateway_key_goes_only_to_its_own_host_and_worker_passwords_stay_out_of_names(
    peers, daemon_factory, tmp_path: Path
):
    # one worker on the gateway's host (127.0.0.1), one on another name ("localhost": another
    # host as far as anyone configured), its URL carrying a password
    near, far = peers({"/server_info": _server_info}), peers({"/server_info": _server_info})
    workers = [
        f"http://127.0.0.1:{near.port}",
        f"http://ops:{WORKER_PASSWORD}@localhost:{far.port}",
    ]
    gateway = peers({"/engine_metrics": lambda: _page(workers)})
    (tmp_path / "key").write_text(API_KEY + "\n")
    target = {"url": f"http://127.0.0.1:{gateway.port}", "name": "gw", "source": "gateway",
              "api_key_file": str(tmp_path / "key")}  # fmt: skip
    daemon = daemon_factory({**FAST, "targets": [target]})
    names = daemon.wait_for(
        lambda d: len(n := [t["name"] for t in d.get("/targets").json()["data"]]) == 2 and n
    )
    daemon.wait_for(lambda _d: near.seen and far.seen)
    assert sorted(names) == sorted([f"gw/127.0.0.1:{near.port}", f"gw/localhost:{far.port}"])
    assert set(near.authorizations()) == {f"Bearer {API_KEY}"}
    assert not any(API_KEY in a for a in far.authorizations())
    shown = daemon.get("/targets").text + daemon.get("/metrics").text + daemon.logs()
    assert WORKER_PASSWORD not in shown


def test_a_page_listing_too_many_workers_fails_with_a_clear_error(peers, daemon_factory):
    # 20,000 workers once cost 1.3 GB and most of the scrapes; now the page fails at once
    workers = [f"http://10.{i // 65536}.{i // 256 % 256}.{i % 256}:30000" for i in range(20_000)]
    gateway = peers({"/engine_metrics": lambda: _page(workers)})
    target = {"url": f"http://127.0.0.1:{gateway.port}", "name": "gw", "source": "gateway"}
    daemon = daemon_factory({**FAST, "targets": [target]})
    shown = daemon.wait_for(
        lambda d: [t for t in d.get("/targets").json()["data"] if t["error_reason"]]
    )
    assert [t["name"] for t in shown] == ["gw/engine_metrics"]
    assert shown[0]["error_reason"] == "worker_limit_exceeded"
    assert "more than 2,000 workers" in shown[0]["error"]


def test_a_worker_url_of_a_megabyte_fails_the_page_and_the_daemon_goes_on(peers, daemon_factory):
    workers = ["http://" + "a" * 1_000_000 + ":1", "http://127.0.0.1:9"]
    gateway = peers({"/engine_metrics": lambda: _page(workers)})
    target = {"url": f"http://127.0.0.1:{gateway.port}", "name": "gw", "source": "gateway"}
    daemon = daemon_factory({**FAST, "targets": [target]})
    shown = daemon.wait_for(
        lambda d: [t for t in d.get("/targets").json()["data"] if t["error_reason"]]
    )
    assert shown[0]["error_reason"] == "worker_limit_exceeded"
    assert "1,000,009 characters (at most 2,048)" in shown[0]["error"]
    assert daemon.get("/healthz", timeout=2).status_code == 200
