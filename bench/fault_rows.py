"""The rows of the fault matrix (`fault_matrix.py`): each a name, a group, what it checks, what
it sets up before the daemon starts (a hostile target, a peer's answer, a process option) and
the fault it applies once the control target's advice is out. Groups: hostile strings, clocks,
target faults, log sources, peers, API abuse, config faults, process faults."""

import gzip
import os
import resource
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fault_world import DAEMON, INFO, PAGE, SHIM, World

from tests.faults.test_hostile_pages import _nan_inf, _trickle
from tests.faults.test_target_faults import Flapper
from tests.helpers import HostileHandler, Route
from tests.ports import free_port

MIB = 1024 * 1024
DECODE = (
    "[2026-01-01 00:00:00] Decode batch, #running-req: 40, #token: 9000, token usage: 0.30, "
    "cuda graph: True, gen throughput (token/s): 800.00, #queue-req: 7\n"
)


def _nothing(_world: World) -> None:
    """No setup."""


def _run_on(_world: World) -> None:
    """The fault is in place from the start: let the daemon run on with it."""
    time.sleep(3.0)


def _no_problems(_world: World) -> list[str]:
    return []


@dataclass(frozen=True)
class Row:
    """One fault: set up before the daemon starts, applied once the control advice is out."""

    name: str
    group: str
    checks: str
    setup: Callable[[World], None] = _nothing
    fault: Callable[[World], None] = _run_on
    check: Callable[[World], list[str]] = field(default=_no_problems)


# -- building blocks --------------------------------------------------------------------------


def add_target(world: World, name: str, url: str | None = None, **extra: Any) -> None:
    """A target `name` (at the hostile server's `/name` unless `url`) that /targets must list."""
    world.config["targets"].append({"name": name, "url": url or world.hostile.url(name), **extra})
    world.expected.append(name)


def serving(page: bytes | Callable[[], bytes] = PAGE, info: bytes | None = None) -> Route:
    """A route: `page` for /metrics, `info` (else the plain fixture) for /server_info."""
    import json

    info_body = info if info is not None else json.dumps(INFO).encode()

    def route(_handler: HostileHandler, endpoint: str) -> bytes:
        if "server_info" in endpoint:
            return info_body
        if "metrics" in endpoint:
            return page() if callable(page) else page
        return b"ok" if "health" in endpoint else b""

    return route


def hostile(route: Route, name: str = "hostile") -> Callable[[World], None]:
    """Setup: a target served by `route`."""

    def setup(world: World) -> None:
        world.routes[name] = route
        add_target(world, name)

    return setup


def answered(status: int, body: bytes = b"", **headers: str) -> Route:
    """A route answering every request with `status`, `body` and `headers`."""

    def route(handler: HostileHandler, _endpoint: str) -> None:
        handler.send_bytes(body, status=status, **headers)

    return route


def streamed(chunks: Callable[[], Iterable[bytes]]) -> Route:
    """A route streaming `chunks()` for /metrics, close-delimited."""

    def route(_handler: HostileHandler, endpoint: str) -> Iterable[bytes] | bytes:
        return chunks() if "metrics" in endpoint else b""

    return route


class RawPeer:
    """A 127.0.0.1 TCP port whose every connection goes to `serve(conn)` on a thread of its own
    (over TLS when `tls` is given): for what no HTTP server would send."""

    def __init__(self, serve: Callable[[socket.socket], None], tls: ssl.SSLContext | None = None):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port, self.serve, self.tls, self.open = self.sock.getsockname()[1], serve, tls, True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.open:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            self.serve(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.open = False
        self.sock.close()


def raw_target(serve: Callable[[socket.socket], None], scheme: str = "http",
               wrap: bool = False, **extra: Any) -> Callable[[World], None]:  # fmt: skip
    """Setup: a target `raw` on a RawPeer."""

    def setup(world: World) -> None:
        context = None
        if wrap:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            files = world.shared.files
            context.load_cert_chain(files["server_cert"], files["server_key"])
        peer = RawPeer(serve, context)
        world.cleanups.append(peer.close)
        add_target(world, "raw", f"{scheme}://127.0.0.1:{peer.port}", **extra)

    return setup


def _request(conn: socket.socket) -> bytes:
    conn.settimeout(10)
    return conn.recv(65536)


def _rst(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")


def rst_at_once(conn: socket.socket) -> None:
    _rst(conn)


def rst_mid_body(conn: socket.socket) -> None:
    _request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + PAGE[:500])
    _rst(conn)


def silent(_conn: socket.socket) -> None:
    time.sleep(20)


def slowloris(conn: socket.socket) -> None:
    _request(conn)
    for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n":
        conn.send(bytes([byte]))
        time.sleep(0.3)


def sent(data: bytes) -> Callable[[socket.socket], None]:
    """A peer answering every request with these raw bytes, then closing."""

    def serve(conn: socket.socket) -> None:
        _request(conn)
        conn.sendall(data)

    return serve


# -- hostile strings --------------------------------------------------------------------------


def _labelled(value: bytes) -> bytes:
    """The page with a label of `value` on the queue series."""
    line = b'sglang:num_queue_reqs{model_name="' + value + b'",tp_rank="0"} 3\n'
    return line + PAGE


def _info_with(**fields: object) -> bytes:
    import json

    return json.dumps({**INFO, **fields}).encode()


def _info_every_string(value: str) -> bytes:
    import json

    return json.dumps({k: (value if isinstance(v, str) else v) for k, v in INFO.items()}).encode()


def _log_target(lines: Callable[[World], bytes] | bytes) -> Callable[[World], None]:
    """Setup: a target `logged` (the plain page) following a log file holding `lines`."""

    def setup(world: World) -> None:
        path = world.tmp / "logged.log"
        path.write_bytes(lines(world) if callable(lines) else lines)
        world.routes["logged"] = serving()
        add_target(world, "logged", log_file=str(path))

    return setup


def _prompts(world: World) -> bytes:
    """`--log-requests` lines whose prompts hold SGLang's own messages (and a token)."""
    said = (
        "KV cache pool is full. Retract requests. #retracted_reqs: 50, #new_token_ratio: "
        "0.3000 -> 1.0000\\n"
        + DECODE.replace("\n", "\\n")
        + "CUDA out of memory. Tried to allocate 20.00 GiB\\nRuntimeError: NCCL error"
    )
    line = (
        f"[2026-01-01 00:00:01] Receive: obj=GenerateReqInput(text='{said}', "
        f"sampling_params={{'api_key': '{world.shared.value(6)}'}}, rid='r1')\n"
    )
    return (line * 50 + DECODE * 10).encode()


def _no_advice_from_prompts(world: World) -> list[str]:
    advice = world.d.get("/advice", params={"target": "logged"}, timeout=5).json()["data"]
    wrong = [a["rule"] for a in advice if "retract" in a["rule"] or "crash" in a["rule"]
             or "oom" in a["rule"]]  # fmt: skip
    return [f"advice from a prompt's text: {', '.join(wrong)}"] * bool(wrong)


def _secret_tail(world: World, size: int) -> str:
    v = world.shared.value
    return f"https://ops:{v(1)}@hub.example/" + "a" * size + f"?token={v(2)}&key={v(5)}"


def _info_route(build: Callable[[World], bytes]) -> Callable[[World], None]:
    """Setup: a target `info` serving the plain page and `build(world)` as `/server_info`."""

    def setup(world: World) -> None:
        body = build(world)
        world.routes["info"] = serving(info=body)
        add_target(world, "info")

    return setup


STRINGS = [
    Row("metrics_line_1mb", "hostile strings", "a 1 MB comment line in the page",
        hostile(serving(PAGE + b"# " + b"x" * MIB + b"\n"))),
    Row("metrics_label_value_100kb", "hostile strings", "a 100 KB label value",
        hostile(serving(_labelled(b"m" * 100_000)))),
    Row("metrics_help_1mb", "hostile strings", "a 1 MB HELP text",
        hostile(serving(b"# HELP sglang:token_usage " + b"h" * MIB + b"\n" + PAGE))),
    Row("metrics_nul_bytes", "hostile strings", "NUL bytes in label values and lines",
        hostile(serving(_labelled(b"a\x00b") + b"\x00\x00\n" + PAGE))),
    Row("metrics_invalid_utf8", "hostile strings", "invalid UTF-8 in label values",
        hostile(serving(_labelled(b"\xff\xfe\xc3\x28") + b"# \xed\xa0\x80\n"))),
    Row("metrics_ansi", "hostile strings", "ANSI escapes in label values",
        hostile(serving(_labelled(b"\x1b[2J\x1b]0;owned\x07\x1b[31mred")))),
    Row("metrics_crlf", "hostile strings", "CRLF line ends",
        hostile(serving(PAGE.replace(b"\n", b"\r\n")))),
    Row("metrics_nan_inf", "hostile strings", "NaN and infinities in the gauges",
        hostile(_nan_inf)),
    Row("metrics_100k_series", "hostile strings", "100,000 series (past sample_limit)",
        hostile(serving(b"".join(b'sglang:x{i="%d"} 1\n' % i for i in range(100_000)) + PAGE))),
    Row("info_strings_100kb", "hostile strings", "every /server_info string 100 KB",
        _info_route(lambda _w: _info_every_string("s" * 100_000))),
    Row("info_100kb_url_with_token", "hostile strings",
        "a 100 KB /server_info URL ending in a token (kinds 1, 2, 5)",
        _info_route(lambda w: _info_with(model_path=_secret_tail(w, 100_000)))),
    Row("info_4mb_url", "hostile strings", "a 3.9 MB URL in /server_info with a token",
        _info_route(lambda w: _info_with(tokenizer_path=_secret_tail(w, 3_900_000)))),
    Row("info_nul_bytes", "hostile strings", "NUL bytes in /server_info strings",
        _info_route(lambda _w: _info_with(model_path="a\x00b", served_model_name="\x00" * 9))),
    Row("info_invalid_utf8", "hostile strings", "invalid UTF-8 in the /server_info body",
        _info_route(lambda _w: _info_with(model_path="MARK").replace(b"MARK", b"\xff\xfe\xc3"))),
    Row("info_ansi", "hostile strings", "ANSI escapes in /server_info strings",
        _info_route(lambda _w: _info_with(served_model_name="\x1b[2J\x1b]0;owned\x07x"))),
    Row("info_lone_surrogate", "hostile strings", "a lone surrogate (\\ud800) in /server_info",
        _info_route(lambda _w: _info_with(model_path="X").replace(b'"X"', b'"\\ud800"'))),
    Row("info_nested_1000", "hostile strings", "/server_info nested 1,000 deep",
        _info_route(lambda _w: _info_with(extra=None).replace(
            b'"extra": null', b'"extra": ' + b"[" * 1000 + b"]" * 1000))),
    Row("info_10k_keys", "hostile strings", "/server_info with 10,000 keys",
        _info_route(lambda _w: _info_with(**{f"k{i}": "v" * 20 for i in range(10_000)}))),
    Row("info_wrong_types", "hostile strings", "/server_info fields of the wrong types",
        _info_route(lambda _w: _info_with(tp_size="eight", max_running_requests=[1, 2],
                                          mem_fraction_static={"a": 1},
                                          chunked_prefill_size=1e308))),
    Row("info_huge_numbers", "hostile strings", "/server_info numbers 10^400 and NaN",
        _info_route(lambda _w: _info_with(tp_size=0).replace(
            b'"tp_size": 0', b'"tp_size": 1' + b"0" * 400 + b', "x": NaN'))),
    Row("info_not_json", "hostile strings", "/server_info an HTML page",
        _info_route(lambda _w: b"<html><body>" + b"x" * 100_000 + b"</body></html>")),
    Row("log_prompts_holding_sglang_messages", "hostile strings",
        "prompts logged with --log-requests holding SGLang messages give no advice",
        _log_target(_prompts), check=_no_advice_from_prompts),
    Row("log_nul_bytes", "hostile strings", "NUL bytes in log lines",
        _log_target(DECODE.encode().replace(b"Decode", b"De\x00code") * 20 + b"\x00" * 1000)),
    Row("log_invalid_utf8", "hostile strings", "invalid UTF-8 in log lines",
        _log_target(b"\xff\xfe\xc3\x28 " + DECODE.encode() * 20 + b"\xed\xa0\x80\n")),
    Row("log_ansi", "hostile strings", "ANSI escapes in log lines",
        _log_target(b"\x1b[2J\x1b]0;owned\x07" + DECODE.encode() * 20)),
    Row("log_line_5mb", "hostile strings", "a 5 MB log line",
        _log_target(b"[2026-01-01 00:00:00] " + b"y" * (5 * MIB) + b"\n" + DECODE.encode())),
    Row("log_number_5000_digits", "hostile strings", "a 5,000-digit count in a log line",
        _log_target(DECODE.replace("#queue-req: 7", "#queue-req: " + "9" * 5000).encode())),
]  # fmt: skip


# -- clocks -----------------------------------------------------------------------------------


def _stepped(world: World) -> None:
    """Setup: the daemon's wall clock read through tests/faults/clockshift."""
    shift = world.tmp / "clock-shift"
    shift.write_text("0")
    world.env.update(PYTHONPATH=f"{SHIM}:{DAEMON}", CLOCK_SHIFT_FILE=str(shift))


def _steps(*seconds: float) -> Callable[[World], None]:
    def fault(world: World) -> None:
        for shift in seconds:
            (world.tmp / "clock-shift").write_text(str(shift))
            time.sleep(2.0)

    return fault


CLOCKS = [
    Row(f"clock_{label}", "clocks", f"the wall clock stepped {label.replace('_', ' ')}",
        _stepped, _steps(*steps))
    for label, steps in (
        ("plus_60s", (60,)), ("minus_60s", (-60,)), ("plus_1h", (3600,)), ("minus_1h", (-3600,)),
        ("plus_1h_and_back", (3600, 0)), ("minus_1h_and_back", (-3600, 0)),
        ("minus_1y", (-365 * 86400,)), ("jitter_60s", (60, -60, 60, 0)),
    )
]  # fmt: skip


# -- target faults ----------------------------------------------------------------------------


@dataclass
class _Bombs:
    """Compressed bodies, built once."""

    cache: dict[str, bytes] = field(default_factory=dict)

    def gzip_bomb(self) -> bytes:
        """64 MiB of exposition text in about 64 KiB."""
        if "bomb" not in self.cache:
            line = b"sglang:num_queue_reqs 1\n"
            self.cache["bomb"] = gzip.compress(line * (64 * MIB // len(line)), 9)
        return self.cache["bomb"]


BOMBS = _Bombs()


def _gzip_route(body: Callable[[], bytes], encoding: str = "gzip") -> Route:
    def route(handler: HostileHandler, endpoint: str) -> None:
        if "metrics" in endpoint:
            handler.send_bytes(body(), Content_Encoding=encoding)
        else:
            handler.send_bytes(b"Not Found", status=404)

    return route


def _redirect(location: Callable[[HostileHandler], str]) -> Route:
    def route(handler: HostileHandler, _endpoint: str) -> None:
        handler.send_bytes(b"", status=302, Location=location(handler))

    return route


def _big_page(size: int) -> Iterator[bytes]:
    line = b"sglang:num_queue_reqs 1\n"
    chunk = line * (MIB // len(line))
    return iter([chunk] * (size // len(chunk)))


def _https_target(name: str, **tls: Any) -> Callable[[World], None]:
    """Setup: an https URL to the hostile server (plain HTTP) with this TLS config."""

    def setup(world: World) -> None:
        world.routes[name] = serving()
        add_target(world, name, world.hostile.url(name).replace("http:", "https:"),
                   tls=tls or None)  # fmt: skip

    return setup


def _tls_server_target(plain: bool, **tls_config: Any) -> Callable[[World], None]:
    """Setup: a target on a TLS server (certificate for 127.0.0.1 from the run's own CA)."""

    def setup(world: World) -> None:
        config = {k: str(world.shared.files[v]) if v in world.shared.files else v
                  for k, v in tls_config.items()}  # fmt: skip
        raw_target(sent(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(PAGE) + PAGE),
                   "http" if plain else "https", wrap=True, **({"tls": config} if config else {})
                   )(world)  # fmt: skip

    return setup


def _flapping(world: World) -> None:
    flapper = Flapper(world.shared.control_url).__enter__()
    world.cleanups.append(lambda: flapper.__exit__(None, None, None))
    add_target(world, "flapping", flapper.url)


def _dns(host: str) -> Callable[[World], None]:
    def setup(world: World) -> None:
        add_target(world, "odd_dns", f"http://{host}:{free_port()}")

    return setup


TARGETS = [
    Row("target_refused", "target faults", "a port that refuses connections",
        lambda w: add_target(w, "refused", f"http://127.0.0.1:{free_port()}")),
    Row("target_rst_on_accept", "target faults", "RST as soon as a connection opens",
        raw_target(rst_at_once)),
    Row("target_rst_mid_body", "target faults", "RST half-way through the page",
        raw_target(rst_mid_body)),
    Row("target_accepts_never_answers", "target faults", "a connection held without a byte",
        raw_target(silent)),
    Row("target_slowloris_headers", "target faults", "the status line at a byte per 0.3 s",
        raw_target(slowloris)),
    Row("target_trickle_body", "target faults", "the page at a byte a second", hostile(_trickle)),
    Row("target_page_30mb", "target faults", "a 30 MB page with its length",
        hostile(serving(b"sglang:num_queue_reqs 1\n" * (30 * MIB // 24)))),
    Row("target_page_30mb_streamed", "target faults", "a 30 MB page without a length",
        hostile(streamed(lambda: _big_page(30 * MIB)))),
    Row("target_gzip_bomb", "target faults", "64 KiB of gzip inflating to 64 MiB",
        hostile(_gzip_route(BOMBS.gzip_bomb))),
    Row("target_gzip_corrupt", "target faults", "Content-Encoding: gzip over garbage",
        hostile(_gzip_route(lambda: b"\x1f\x8b\x08\x00" + os.urandom(4096)))),
    Row("target_deflate_page", "target faults", "Content-Encoding: deflate",
        hostile(_gzip_route(lambda: zlib.compress(PAGE), "deflate"))),
    Row("target_unknown_encoding", "target faults", "Content-Encoding: br over plain text",
        hostile(_gzip_route(lambda: PAGE, "br"))),
    Row("target_html_content_type", "target faults", "text/html: a login page",
        hostile(answered(200, b"<html><form>login</form></html>" * 100,
                         Content_Type="text/html"))),  # fmt: skip
    Row("target_json_content_type", "target faults", "application/json on /metrics",
        hostile(answered(200, b'{"detail": "Not Found"}', Content_Type="application/json"))),
    Row("target_protobuf_content_type", "target faults", "a protobuf exposition body",
        hostile(answered(200, os.urandom(2048), Content_Type="application/vnd.google.protobuf; "
                         "proto=io.prometheus.client.MetricFamily; encoding=delimited"))),
    Row("target_redirect_loop", "target faults", "a redirect to itself",
        hostile(_redirect(lambda h: h.path))),
    Row("target_redirect_4mb_url", "target faults", "a redirect to a 4 MB URL",
        hostile(_redirect(lambda _h: "http://127.0.0.1:9/" + "u" * (4 * MIB)))),
    Row("target_redirect_elsewhere", "target faults", "a redirect to another host's page",
        hostile(_redirect(lambda _h: "http://localhost:9/metrics"))),
    Row("target_500", "target faults", "500 on every path", hostile(answered(500, b"boom"))),
    Row("target_401", "target faults", "401 on every path",
        hostile(answered(401, b"", WWW_Authenticate='Basic realm="x"'))),
    Row("target_429_retry_after_huge", "target faults", "429 with Retry-After 10^12",
        hostile(answered(429, b"slow down", Retry_After="1000000000000"))),
    Row("target_204_empty", "target faults", "204 with no page", hostile(answered(204))),
    Row("target_not_http", "target faults", "an SSH banner instead of HTTP",
        raw_target(sent(b"SSH-2.0-OpenSSH_9.6\r\n" + os.urandom(512)))),
    Row("target_length_lies", "target faults", "Content-Length past the bytes sent",
        raw_target(sent(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + PAGE[:300]))),
    Row("target_chunked_broken", "target faults", "chunked encoding with bad sizes",
        raw_target(sent(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n"))),
    Row("target_header_1mb", "target faults", "a 1 MB response header",
        raw_target(sent(b"HTTP/1.1 200 OK\r\nX-Big: " + b"h" * MIB + b"\r\n\r\n"))),
    Row("target_10k_headers", "target faults", "10,000 response headers",
        raw_target(sent(b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 10_000 + b"\r\n"))),
    Row("target_https_to_plain_http", "target faults", "an https URL to a plain HTTP server",
        _https_target("tls_plain")),
    Row("target_http_to_tls_server", "target faults", "an http URL to a TLS server",
        _tls_server_target(plain=True)),
    Row("target_tls_unknown_ca", "target faults", "a TLS server whose CA is not trusted",
        _tls_server_target(plain=False)),
    Row("target_tls_wrong_name", "target faults", "a certificate for another name",
        _tls_server_target(plain=False, ca_file="ca", server_name="other.example")),
    Row("target_tls_client_cert_good", "target faults", "TLS with the planted client key in use",
        _tls_server_target(plain=False, ca_file="ca", cert_file="cert", key_file="key")),
    Row("target_tls_handshake_stalls", "target faults", "a TLS port that never handshakes",
        raw_target(silent, "https")),
    Row("target_flapping", "target faults", "a target up and down every second", _flapping),
    Row("dns_invalid_tld", "target faults", "gpu-1.invalid (never resolves)",
        _dns("gpu-1.invalid")),
    Row("dns_63_char_label", "target faults", "a 63-character label",
        _dns("a" * 63 + ".invalid")),
    Row("dns_trailing_dot", "target faults", "localhost. (a trailing dot)", _dns("localhost.")),
    Row("dns_punycode", "target faults", "an IDN host (xn--)", _dns("xn--nxasmq6b.invalid")),
    Row("dns_short_ipv4", "target faults", "127.1", _dns("127.1")),
    Row("dns_ipv6_loopback", "target faults", "[::1] with nothing listening", _dns("[::1]")),
    Row("dns_underscore", "target faults", "a host name with an underscore",
        _dns("gpu_1.invalid")),
]  # fmt: skip


# -- log sources ------------------------------------------------------------------------------


def _log_path(world: World) -> Path:
    return world.tmp / "logged.log"


def _logged(world: World, log: str | None = None, command: list[str] | None = None) -> None:
    world.routes["logged"] = serving()
    source = {"log_file": log} if log is not None else {"log_command": command}
    add_target(world, "logged", **source)


def _fifo(world: World) -> None:
    os.mkfifo(_log_path(world))
    _logged(world, str(_log_path(world)))


def _fifo_writer(world: World) -> None:
    def write() -> None:
        with _log_path(world).open("w") as fifo:
            fifo.write(DECODE * 200)

    threading.Thread(target=write, daemon=True).start()
    time.sleep(3.0)


def _stdin(mode: str) -> Callable[[World], None]:
    def setup(world: World) -> None:
        _logged(world, "-")
        if mode == "closed":
            world.popen.update(stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0))
        else:
            world.popen.update(stdin=subprocess.PIPE)

    return setup


def _stdin_feed(size: int, close: bool) -> Callable[[World], None]:
    def fault(world: World) -> None:
        pipe = world.d.proc.stdin if world.d.proc else None
        assert pipe is not None
        if close:
            pipe.close()
            time.sleep(3.0)
            return

        def write() -> None:
            try:
                pipe.write(DECODE.encode() * (size // len(DECODE)))
                pipe.flush()
            except OSError:
                pass

        threading.Thread(target=write, daemon=True).start()
        time.sleep(4.0)

    return fault


def _command(*argv: str) -> Callable[[World], None]:
    """Setup: `log_command` (ended by `timeout` should the daemon leave it running)."""

    def setup(world: World) -> None:
        _logged(world, command=["timeout", "30", *argv])

    return setup


def _file(world: World) -> None:
    _log_path(world).write_text(DECODE * 10)
    _logged(world, str(_log_path(world)))


def _then(*actions: Callable[[Path], None]) -> Callable[[World], None]:
    def fault(world: World) -> None:
        for action in actions:
            action(_log_path(world))
            time.sleep(1.5)

    return fault


def _append(text: str) -> Callable[[Path], None]:
    return lambda path: path.open("a").write(text)


def _rotate(path: Path) -> None:
    path.rename(path.with_suffix(".1"))
    path.write_text(DECODE * 5)


def _truncate(path: Path) -> None:
    path.write_text("")


def _replace_by_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _symlink_loop(world: World) -> None:
    _log_path(world).symlink_to(_log_path(world))
    _logged(world, str(_log_path(world)))


PY = sys.executable
LOGS = [
    Row("log_fifo_no_writer", "log sources", "a named pipe nobody writes", _fifo),
    Row("log_fifo_writer_comes_and_goes", "log sources", "a pipe's writer writes, then closes",
        _fifo, _fifo_writer),
    Row("log_stdin_closed", "log sources", 'log_file "-" with standard input closed',
        _stdin("closed")),
    Row("log_stdin_flood_16mb", "log sources", "16 MB piped into standard input at once",
        _stdin("pipe"), _stdin_feed(16 * MIB, close=False)),
    Row("log_stdin_eof", "log sources", "standard input closed by its writer",
        _stdin("pipe"), _stdin_feed(0, close=True)),
    Row("log_command_floods", "log sources", "a log_command writing as fast as it can",
        _command(PY, "-c", f"import sys\nwhile True: sys.stdout.write({DECODE!r} * 100)")),
    Row("log_command_exits_at_once", "log sources", "a log_command that ends at once",
        _command("true")),
    Row("log_command_missing", "log sources", "a log_command that does not exist",
        lambda w: _logged(w, command=["/nonexistent/sglang-logs", "-f"])),
    Row("log_command_binary_garbage", "log sources", "a log_command writing random bytes",
        _command("head", "-c", "4000000", "/dev/urandom")),
    Row("log_command_prints_env", "log sources", "a log_command printing its environment",
        _command("sh", "-c", "env; sleep 30")),
    Row("log_command_env_to_stderr", "log sources", "a log_command printing its env to stderr",
        _command("sh", "-c", "env >&2; sleep 30")),
    Row("log_rotated", "log sources", "the log renamed and a new one started",
        _file, _then(_rotate, _append(DECODE * 5))),
    Row("log_truncated", "log sources", "the log truncated, then written again",
        _file, _then(_truncate, _append(DECODE * 5))),
    Row("log_deleted", "log sources", "the log deleted", _file, _then(Path.unlink)),
    Row("log_replaced_by_directory", "log sources", "the log replaced by a directory",
        _file, _then(_replace_by_dir)),
    Row("log_symlink_loop", "log sources", "log_file a symlink to itself", _symlink_loop),
    Row("log_grows_20mb", "log sources", "20 MB appended at once", _file,
        _then(_append(DECODE * (20 * MIB // len(DECODE))))),
]  # fmt: skip


# -- peers ------------------------------------------------------------------------------------


def _gateway(page: Callable[[World], bytes], expected: bool = False) -> Callable[[World], None]:
    def setup(world: World) -> None:
        body = page(world)
        world.routes["gw"] = lambda _h, e: body if "engine_metrics" in e else b""
        world.gateway_expected = expected

    return setup


def _workers(urls: list[str]) -> bytes:
    return "".join(f'sglang_num_running_reqs{{worker_addr="{u}"}} 3\n' for u in urls).encode()


def _prometheus(answer: Callable[[World, str], bytes | None]) -> Callable[[World], None]:
    def setup(world: World) -> None:
        world.prometheus.answer = lambda path: answer(world, path)

    return setup


def _vector(series: list[dict[str, str]], value: str = "1") -> bytes:
    import json

    result = [{"metric": m, "value": [time.time(), value]} for m in series]
    data = {"resultType": "vector", "result": result}
    return json.dumps({"status": "success", "data": data}).encode()


def _receiver(status: int = 200, delay: float = 0.0) -> Callable[[World], None]:
    def setup(world: World) -> None:
        world.receiver.status, world.receiver.delay_seconds = status, delay

    return setup


def _alertmanager_down(world: World) -> None:
    urls = world.config["alertmanager"]["urls"]
    urls[0] = urls[0].rsplit(":", 1)[0] + f":{free_port()}"


def _prometheus_down(world: World) -> None:
    url = world.config["prometheus"]["url"]
    world.config["prometheus"]["url"] = url.rsplit(":", 1)[0] + f":{free_port()}"


PEERS = [
    Row("gateway_20000_workers", "peers", "a gateway listing 20,000 workers",
        _gateway(lambda _w: _workers([f"http://10.{i // 256 % 256}.{i % 256}.1:30000"
                                      for i in range(20_000)]))),
    Row("gateway_worker_url_4mb", "peers", "a gateway worker URL of 4 MB",
        _gateway(lambda _w: _workers(["http://" + "a" * (4 * MIB) + ":1"]))),
    Row("gateway_worker_with_password", "peers", "a worker URL with userinfo (kind 1)",
        _gateway(lambda w: _workers([w.hostile.url("worker").replace(
            "http://", f"http://ops:{w.shared.value(1)}@")]), expected=True)),
    Row("gateway_worker_url_with_token", "peers", "a worker URL with ?token= (kind 2)",
        _gateway(lambda w: _workers([w.hostile.url("worker") + f"?token={w.shared.value(2)}"]),
                 expected=True)),
    Row("gateway_page_garbage", "peers", "a gateway page of random bytes",
        _gateway(lambda _w: os.urandom(65536))),
    Row("gateway_refused", "peers", "a gateway that refuses connections",
        lambda w: (w.config["targets"][2].update(url=f"http://127.0.0.1:{free_port()}"),
                   setattr(w, "gateway_expected", False))),
    Row("prometheus_silent", "peers", "a Prometheus that never answers",
        _prometheus(lambda _w, _p: None)),
    Row("prometheus_refused", "peers", "a Prometheus that refuses connections",
        _prometheus_down),
    Row("prometheus_answer_20mb", "peers", "a 20 MB Prometheus answer",
        _prometheus(lambda _w, _p: b'{"status":"success","data":{"resultType":"vector",'
                    b'"result":[]},"pad":"' + b"p" * (20 * MIB) + b'"}')),
    Row("prometheus_20000_series", "peers", "20,000 series in every answer",
        _prometheus(lambda _w, _p: _vector([{"instance": f"10.0.{i // 256}.{i % 256}:30000",
                                             "job": "sglang"} for i in range(20_000)]))),
    Row("prometheus_malformed", "peers", "Prometheus JSON cut short",
        _prometheus(lambda _w, _p: b'{"status":"success","data":{"resultType":"vector","res')),
    Row("prometheus_500", "peers", "Prometheus answering 500",
        _prometheus(lambda _w, _p: b'500{"status":"error","error":"internal"}')),
    Row("prometheus_html", "peers", "Prometheus answering a proxy's HTML page",
        _prometheus(lambda _w, _p: b"502<html>Bad Gateway</html>")),
    Row("prometheus_error_echoing_token", "peers", "a Prometheus error quoting a token (kind 2)",
        _prometheus(lambda w, _p: b'400{"status":"error","errorType":"bad_data","error":'
                    b'"invalid parameter token=' + w.shared.value(2).encode() + b'"}')),
    Row("prometheus_hostile_labels", "peers", "series with ANSI, NUL and 100 KB label values",
        _prometheus(lambda _w, _p: _vector([{"instance": "\x1b[2Jx\x00y", "job": "s"},
                                            {"instance": "i" * 100_000, "job": "s"}]))),
    Row("prometheus_nan_values", "peers", "series valued NaN and +Inf",
        _prometheus(lambda _w, p: _vector([{"instance": "a:1", "job": "s"}],
                                          "NaN" if "query" in p else "+Inf"))),
    Row("alertmanager_down", "peers", "an Alertmanager that refuses connections",
        _alertmanager_down),
    Row("alertmanager_slow", "peers", "an Alertmanager answering after 5 s", _receiver(delay=5)),
    Row("alertmanager_500", "peers", "an Alertmanager answering 500", _receiver(500)),
    Row("alertmanager_400", "peers", "an Alertmanager refusing the alerts (400)",
        _receiver(400)),
    Row("alertmanager_hangs", "peers", "an Alertmanager holding each request 60 s",
        _receiver(delay=60)),
]  # fmt: skip


# -- API abuse --------------------------------------------------------------------------------


def _sockets(world: World, count: int, payload: bytes, hold: float = 3.0,
             trickle: bool = False) -> list[socket.socket]:  # fmt: skip
    """`count` connections to the daemon, each sent `payload` (a byte at a time if `trickle`)
    and held `hold` seconds unread."""
    conns = []
    for _ in range(count):
        try:
            conn = socket.create_connection(("127.0.0.1", world.d.port), timeout=5)
        except OSError:
            continue
        conns.append(conn)
        if not trickle:
            conn.sendall(payload)
    end = time.monotonic() + hold
    for index in range(len(payload) if trickle else 0):
        for conn in conns:
            try:
                conn.send(payload[index : index + 1])
            except OSError:
                pass
        if time.monotonic() > end:
            break
        time.sleep(0.2)
    time.sleep(max(0.0, end - time.monotonic()))
    for conn in conns:
        conn.close()
    return conns


def _raw_get(path: str) -> bytes:
    """A GET no client library would send (too long a URL for httpx)."""
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def _get(path: str, **kw: Any) -> Callable[[World], None]:
    def fault(world: World) -> None:
        try:
            httpx.get(world.d.url + path, timeout=10, **kw)
        except httpx.HTTPError:
            pass
        time.sleep(1.0)

    return fault


def _threads(count: int, work: Callable[[], None]) -> None:
    threads = [threading.Thread(target=work, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)


def _reload_flood(world: World) -> None:
    def post() -> None:
        for _ in range(25):
            try:
                httpx.post(world.d.url + "/-/reload", timeout=10)
            except httpx.HTTPError:
                pass

    _threads(4, post)


def _lifecycle(world: World) -> None:
    world.config["web_enable_lifecycle"] = True


def _get_flood(world: World) -> None:
    def get() -> None:
        for path in ("/metrics", "/advice", "/targets", "/rules", "/docs") * 10:
            try:
                httpx.get(world.d.url + path, timeout=10)
            except httpx.HTTPError:
                pass

    _threads(6, get)


def _methods(world: World) -> None:
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"):
        for path in ("/targets", "/advice", "/-/reload", "/metrics"):
            try:
                httpx.request(method, world.d.url + path, timeout=5)
            except httpx.HTTPError:
                pass


def _huge_post(world: World) -> None:
    try:
        httpx.post(world.d.url + "/-/reload", content=b"x" * (64 * MIB), timeout=20)
    except httpx.HTTPError:
        pass


API = [
    Row("api_slow_readers_metrics", "API abuse", "60 clients asking for /metrics, never reading",
        fault=lambda w: _sockets(w, 60, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 4.0)),
    Row("api_slowloris", "API abuse", "40 clients sending headers a byte at a time",
        fault=lambda w: _sockets(w, 40, b"GET /targets HTTP/1.1\r\nHost: x\r\n", 4.0, True)),
    Row("api_held_connections_500", "API abuse", "500 idle connections held open",
        fault=lambda w: _sockets(w, 500, b"", 3.0)),
    Row("api_reload_flood_lifecycle", "API abuse", "100 POST /-/reload with lifecycle on",
        _lifecycle, _reload_flood),
    Row("api_reload_flood_forbidden", "API abuse", "100 POST /-/reload with lifecycle off",
        fault=_reload_flood),
    Row("api_huge_body", "API abuse", "a 64 MB POST body", _lifecycle, _huge_post),
    Row("api_header_1mb", "API abuse", "a 1 MB request header",
        fault=_get("/targets", headers={"X-Big": "h" * MIB})),
    Row("api_path_1mb", "API abuse", "a 1 MB path",
        fault=lambda w: _sockets(w, 1, _raw_get("/targets/" + "p" * MIB), 2.0)),
    Row("api_10k_query_params", "API abuse", "10,000 query parameters",
        fault=lambda w: _sockets(w, 1, _raw_get("/advice?" + "&".join(
            f"target=t{i}" for i in range(10_000))), 2.0)),
    Row("api_invalid_utf8_path", "API abuse", "invalid UTF-8 and NUL in a path",
        fault=lambda w: _sockets(w, 1, b"GET /targets/\xff\xfe%00%ff HTTP/1.1\r\nHost: x\r\n\r\n",
                                 1.0)),
    Row("api_tls_hello_on_http", "API abuse", "a TLS ClientHello sent to the HTTP port",
        fault=lambda w: _sockets(w, 20, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" +
                                 os.urandom(500), 1.0)),
    Row("api_pipelined_100", "API abuse", "100 requests pipelined on one connection",
        fault=lambda w: _sockets(w, 1, b"GET /advice HTTP/1.1\r\nHost: x\r\n\r\n" * 100, 2.0)),
    Row("api_every_method", "API abuse", "PUT, DELETE, PATCH, TRACE and FOO on every route",
        fault=_methods),
    Row("api_get_flood", "API abuse", "300 GETs of the heaviest answers from 6 clients",
        fault=_get_flood),
]  # fmt: skip


# -- config faults ----------------------------------------------------------------------------


def _reload_text(text: Callable[[World], str | bytes]) -> Callable[[World], None]:
    """Fault: SIGHUP with this as the config file, then (by the closing reload) the good one."""

    def fault(world: World) -> None:
        body = text(world)
        world.d.config_path.write_bytes(body.encode() if isinstance(body, str) else body)
        assert world.d.proc is not None
        world.d.proc.send_signal(signal.SIGHUP)
        time.sleep(2.5)

    return fault


def _with_targets(world: World, targets: list[dict[str, Any]]) -> str:
    import yaml

    config = world.full_config()
    return yaml.safe_dump({**config, "targets": config["targets"] + targets})


def _hup_after(world: World, change: Callable[[], object]) -> None:
    """Fault: `change` the config file, SIGHUP, let the daemon run on."""
    change()
    assert world.d.proc is not None
    world.d.proc.send_signal(signal.SIGHUP)
    time.sleep(2.0)


def _config_dir(world: World) -> None:
    path = world.d.config_path
    path.unlink()
    _hup_after(world, path.mkdir)
    path.rmdir()


def _python_tag(world: World) -> str:
    return f"!!python/object/apply:os.system ['touch {world.tmp / 'pwned'}']\n"


def _not_run(world: World) -> list[str]:
    return ["a YAML tag ran a command"] * (world.tmp / "pwned").exists()


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)
CONFIG = [
    Row("reload_yaml_tab_indent", "config faults", "a reload with a tab-indented YAML file",
        fault=_reload_text(lambda w: "targets:\n\t- url: http://ops:"
                           f"{w.shared.value(17)}@gpu-1:30000\n")),
    Row("reload_unknown_key", "config faults", "a reload with an unknown key",
        fault=_reload_text(lambda w: _with_targets(w, []) + "no_such_key: 1\n")),
    Row("reload_port_99999", "config faults", "a reload with a target port 99999",
        fault=_reload_text(lambda w: _with_targets(w, [{"url": "http://gpu-1:99999"}]))),
    Row("reload_missing_key_file", "config faults", "a reload naming a key file that is gone",
        fault=_reload_text(lambda w: _with_targets(
            w, [{"url": "http://gpu-1:1", "api_key_file": "/nonexistent/key"}]))),
    Row("reload_empty_file", "config faults", "a reload with an empty file",
        fault=_reload_text(lambda _w: "")),
    Row("reload_binary_garbage", "config faults", "a reload with 64 KB of random bytes",
        fault=_reload_text(lambda _w: os.urandom(65536))),
    Row("reload_invalid_utf8", "config faults", "a reload with invalid UTF-8 in a value",
        fault=_reload_text(lambda w: _with_targets(w, []).encode() + b"\nx: \xff\xfe\n")),
    Row("reload_config_10mb", "config faults", "a reload with a 10 MB config file",
        fault=_reload_text(lambda w: _with_targets(w, []) + "#" + "c" * (10 * MIB) + "\n")),
    Row("reload_config_deleted", "config faults", "a reload with the config file deleted",
        fault=lambda w: _hup_after(w, w.d.config_path.unlink)),
    Row("reload_config_is_a_directory", "config faults", "a reload with a directory there",
        fault=_config_dir),
    Row("reload_billion_laughs", "config faults", "a reload with a YAML alias bomb",
        fault=_reload_text(lambda _w: BILLION_LAUGHS)),
    Row("reload_nested_10000", "config faults", "a reload nested 10,000 deep",
        fault=_reload_text(lambda _w: "x: " + "[" * 10_000 + "]" * 10_000 + "\n")),
    Row("reload_python_tag", "config faults", "a reload with a !!python tag (never run)",
        fault=_reload_text(_python_tag), check=_not_run),
    Row("reload_target_name_ansi_nul", "config faults", "a reload adding names with ANSI, NUL",
        fault=_reload_text(lambda w: _with_targets(w, [
            {"url": "http://127.0.0.1:9", "name": "\x1b[2Jevil"},
            {"url": "http://127.0.0.1:9", "name": "nul\x00name"}]))),
    Row("reload_target_url_4mb", "config faults", "a reload adding a 4 MB target URL",
        fault=_reload_text(lambda w: _with_targets(
            w, [{"url": "http://127.0.0.1:9/" + "u" * (4 * MIB)}]))),
    Row("reload_empty_dns_label", "config faults", "a reload with host gpu-1..cluster.local",
        fault=_reload_text(lambda w: _with_targets(w, [{"url": "http://gpu-1..cluster.local:1"}]))),
    Row("reload_500_targets", "config faults", "a reload adding 500 refusing targets",
        fault=_reload_text(lambda w: _with_targets(
            w, [{"url": f"http://127.0.0.1:{9}", "name": f"t{i}"} for i in range(500)]))),
    Row("reload_duplicate_names", "config faults", "a reload with two targets of one name",
        fault=_reload_text(lambda w: _with_targets(w, [{"url": "http://127.0.0.1:9",
                                                         "name": "control"}]))),
    Row("reload_over_http_bad_config", "config faults", "POST /-/reload with a bad config",
        _lifecycle, lambda w: (w.d.config_path.write_text("targets: [\n"),
                               w.d.post("/-/reload"), time.sleep(1.0)) and None),
]  # fmt: skip


# -- process faults ---------------------------------------------------------------------------


def _restart(sig: int, twice: bool = False) -> Callable[[World], None]:
    """Fault: the signal (twice, 50 ms apart, if asked), the exit awaited, a new process on the
    same database; its windows must be back before its first scrape."""

    def fault(world: World) -> None:
        proc = world.d.proc
        assert proc is not None
        world.gap_expected = True
        proc.send_signal(sig)
        if twice:
            time.sleep(0.05)
            proc.send_signal(sig)
        code = proc.wait(20)
        if sig != signal.SIGKILL and code != 0:
            world.problems.append(f"exit status {code} after {signal.Signals(sig).name}")
        world.start()
        if not world.control()["samples_in_window"]:
            world.problems.append("the control window was not restored at start")
        world.scrapes_before = 0
        time.sleep(2.0)

    return fault


def _fsize_limit(world: World) -> None:
    limit = 512 * 1024
    soft_only = (limit, resource.RLIM_INFINITY)  # a soft limit another process may lift
    world.popen["preexec_fn"] = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, soft_only)


def _disk_frees_up(world: World) -> None:
    """Fault: a few seconds of failing writes, then the limit lifted (as a disk frees up)."""
    time.sleep(4.0)
    assert world.d.proc is not None
    unlimited = resource.RLIM_INFINITY
    resource.prlimit(world.d.proc.pid, resource.RLIMIT_FSIZE, (unlimited, unlimited))
    time.sleep(2.0)


def _signals(sig: int, count: int, gap: float) -> Callable[[World], None]:
    def fault(world: World) -> None:
        assert world.d.proc is not None
        for _ in range(count):
            world.d.proc.send_signal(sig)
            time.sleep(gap)
        time.sleep(2.0)

    return fault


def _stopped(world: World) -> None:
    world.gap_expected = True  # stopped on purpose: its scrapes stand still for those 3 s
    assert world.d.proc is not None
    world.d.proc.send_signal(signal.SIGSTOP)
    time.sleep(3.0)
    world.d.proc.send_signal(signal.SIGCONT)
    time.sleep(3.0)


def _database(action: Callable[[Path], None]) -> Callable[[World], None]:
    def fault(world: World) -> None:
        action(Path(str(world.d.config["database"])))
        time.sleep(3.0)

    return fault


def _delete_db(path: Path) -> None:
    for file in path.parent.glob(path.name + "*"):
        file.unlink()


def _output_to(target: str) -> Callable[[World], None]:
    def setup(world: World) -> None:
        world.log_visible = False
        if target == "closed pipe":
            read, write = os.pipe()
            os.close(read)
            world.popen.update(stdout=write, stderr=write)
            world.cleanups.append(lambda: os.close(write))
        else:
            handle = open(target, "wb")  # noqa: SIM115 (open while the daemon runs)
            world.popen.update(stdout=handle, stderr=handle)
            world.cleanups.append(handle.close)

    return setup


PROCESS = [
    Row("sighup_storm", "process faults", "50 SIGHUPs in a second",
        fault=_signals(signal.SIGHUP, 50, 0.02)),
    Row("sigterm_then_restart", "process faults", "SIGTERM, then a new process on the database",
        fault=_restart(signal.SIGTERM)),
    Row("sigterm_during_save", "process faults", "a second SIGTERM during the shutdown save",
        fault=_restart(signal.SIGTERM, twice=True)),
    Row("sigint_then_restart", "process faults", "SIGINT (Ctrl-C), then a new process",
        fault=_restart(signal.SIGINT)),
    Row("sigkill_then_restart", "process faults", "SIGKILL while writing, then a new process",
        fault=_restart(signal.SIGKILL)),
    Row("sigstop_3s", "process faults", "stopped for 3 s, then continued", fault=_stopped),
    Row("disk_full_then_freed", "process faults",
        "files capped at 512 KB (RLIMIT_FSIZE), then the cap lifted", _fsize_limit,
        _disk_frees_up),
    Row("database_deleted", "process faults", "the database files deleted while running",
        fault=_database(_delete_db)),
    Row("database_overwritten", "process faults", "the database overwritten with garbage",
        fault=_database(lambda p: p.write_bytes(os.urandom(65536)))),
    Row("output_to_closed_pipe", "process faults", "stdout and stderr a pipe nobody reads",
        _output_to("closed pipe")),
    Row("output_to_dev_full", "process faults", "stdout and stderr /dev/full (ENOSPC)",
        _output_to("/dev/full")),
]  # fmt: skip

ROWS: tuple[Row, ...] = (*STRINGS, *CLOCKS, *TARGETS, *LOGS, *PEERS, *API, *CONFIG, *PROCESS)
