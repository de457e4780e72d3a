"""A Model Gateway reached over mutual TLS, against a real daemon process: its client certificate
goes to the gateway's host only, never to a worker its page lists on another host. Real HTTPS
servers on 127.0.0.1 (a private CA) stand for the gateway and its workers and record whether
each connection presented a client certificate."""

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.certs import CA, Pair

pytestmark = pytest.mark.integration
FAST = {"scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4}


class TlsPeer:
    """An HTTPS server on 127.0.0.1 answering GETs from `pages`; `certs` records, per request,
    the subject of the client certificate presented (None: none). `required`: mutual TLS."""

    def __init__(self, ca: CA, pages: dict[str, bytes], *, required: bool = False) -> None:
        self.pages, self.certs = pages, []
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                del args

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                cert = self.connection.getpeercert()  # type: ignore[attr-defined]
                peer.certs.append(dict(x[0] for x in cert["subject"]) if cert else None)
                body = peer.pages.get(self.path, b"{}")
                self.send_response(200 if self.path in peer.pages else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        pair: Pair = ca.issue(f"peer-{id(self)}")  # for 127.0.0.1 and localhost
        context.load_cert_chain(pair.cert, pair.key)
        context.load_verify_locations(cafile=str(ca.cert_file))
        context.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.http.socket = context.wrap_socket(self.http.socket, server_side=True)
        self.port = self.http.server_port
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    return CA(tmp_path)


@pytest.fixture
def tls_peers(ca: CA) -> Iterator[list[TlsPeer]]:
    started: list[TlsPeer] = []
    yield started
    for peer in started:
        peer.close()


def _page(workers: list[str]) -> bytes:
    lines = ["# TYPE sglang_num_running_reqs gauge"]
    lines += [f'sglang_num_running_reqs{{worker_addr="{w}"}} 3' for w in workers]
    return ("\n".join(lines) + "\n").encode()


def test_the_gateway_client_certificate_never_goes_to_a_worker_on_another_host(
    ca: CA, tls_peers: list[TlsPeer], daemon_factory
):
    info = {"/server_info": json.dumps({"version": "0.5.5", "tp_size": 1}).encode()}
    near, far = TlsPeer(ca, info), TlsPeer(ca, info)
    # "localhost" is another host name than the gateway's 127.0.0.1, whatever it resolves to
    workers = [f"https://127.0.0.1:{near.port}", f"https://localhost:{far.port}"]
    gateway = TlsPeer(ca, {"/engine_metrics": _page(workers)}, required=True)
    tls_peers += [near, far, gateway]
    client = ca.issue("tuner-client", server=False)
    tls = {"ca_file": str(ca.cert_file), "cert_file": str(client.cert), "key_file": str(client.key)}
    target = {"url": f"https://127.0.0.1:{gateway.port}", "name": "gw", "source": "gateway",
              "tls": tls}  # fmt: skip
    daemon = daemon_factory({**FAST, "targets": [target]})
    names = daemon.wait_for(
        lambda d: len(n := [t["name"] for t in d.get("/targets").json()["data"]]) == 2 and n
    )
    daemon.wait_for(lambda _d: near.certs and far.certs)
    assert sorted(names) == sorted([f"gw/127.0.0.1:{near.port}", f"gw/localhost:{far.port}"])
    assert gateway.certs and all(c == {"commonName": "tuner-client"} for c in gateway.certs)
    assert all(c == {"commonName": "tuner-client"} for c in near.certs)  # the gateway's host
    assert far.certs and all(c is None for c in far.certs)  # checked against the CA, no cert
    workers_up = {t["name"]: t["config_error"] for t in daemon.get("/targets").json()["data"]}
    assert workers_up[f"gw/localhost:{far.port}"] is None  # its /server_info was read over TLS
