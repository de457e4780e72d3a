"""One row of the fault matrix: its peers on 127.0.0.1, the 18 planted secret kinds, the real
daemon process (`python -m sglang_tuner run`) and the three verdicts (survived, nothing lost,
no secret leaked). `fault_rows.py` says what each row does to this world; `fault_matrix.py`
runs the rows.

Every row watches the same three targets besides its own: `control` (a simulated SGLang
server, busy enough that its advice fires within seconds: the data that must not be lost),
`secret` (a server whose URL, key, log, TLS key and `/server_info` carry planted secrets) and
`gw` (a Model Gateway with its own key). Its Alertmanagers are a recording receiver of its own
and, when installed, the real `prometheus-alertmanager` all rows share; its Prometheus is a
127.0.0.1 query API whose answers a row can spoil.
"""

import hashlib
import json
import os
import signal
import socketserver
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT / "tests", ROOT / "daemon", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from sglang_sim import ServerSpec, SimFleet  # noqa: E402

from tests.alertmanager_process import AM_BINARY, Alertmanager, Recorder, serve  # noqa: E402
from tests.certs import CA  # noqa: E402
from tests.conftest import DAEMON, FIXTURES, DaemonProcess  # noqa: E402
from tests.helpers import HostileHandler, HostileServer, Route, successful_scrapes  # noqa: E402

SHIM = ROOT / "tests" / "faults" / "clockshift"
PAGE = (FIXTURES / "sglang" / "v0.5.17_a.prom").read_bytes()
INFO = json.loads((FIXTURES / "sglang" / "server_info" / "v0.5.17.json").read_text())
FAST: dict[str, Any] = {
    "scrape_interval_seconds": 0.5, "scrape_timeout_seconds": 0.4,
    "evaluation_interval_seconds": 0.5, "window_seconds": 30.0, "min_samples": 4,
    "hold_for_seconds": 0.0, "keep_firing_for_seconds": 30.0, "log_level": "debug",
}  # fmt: skip
# Scrapes every 0.5 s: the control target standing still longer than this is a stall (the
# poll, the machine's load and a scrape's 0.4 s timeout take the rest).
GAP_SECONDS = 5.0
ANSWERS = ("/advice", "/advice?format=text", "/targets", "/targets/control", "/metrics",
           "/rules", "/readyz", "/changes")  # fmt: skip


# -- the 18 secret kinds ----------------------------------------------------------------------


@dataclass(frozen=True)
class Secret:
    """One planted secret kind: its number, what it is, and the values that must never show."""

    number: int
    kind: str
    values: tuple[str, ...]


def _marker(number: int, shape: str = "plain") -> str:
    """A value unique to the kind throughout (a truncated copy is still told apart), shaped
    like the real thing where its shape matters."""
    digest = hashlib.sha256(f"fault-matrix kind {number}".encode()).hexdigest()
    if shape == "aws":
        return f"AKIA{number:02d}{digest[:14].upper()}"
    return f"fmx{number:02d}{digest[:21]}"


def plant_secrets(tls_key: Path) -> tuple[Secret, ...]:
    """The 18 kinds of issue 32, each with its marker (the TLS key: a line of the key file)."""
    key_line = tls_key.read_text().splitlines()[2]  # key material (line 1 opens alike in every key)
    kinds = (
        "URL userinfo password", "?token=", "?api_key=", "?access_token=", "?key=",
        "--api-key on a launch line", "--admin-api-key on a launch line", "--hf-token / HF_TOKEN",
        "bearer token (Alertmanager bearer_token_file)",
        "basic-auth password written in the config (Prometheus URL)",
        "TLS key file contents", "gateway API key",
        "Alertmanager basic auth (its URL's userinfo)", "Prometheus basic auth (password_file)",
        "Authorization: in a logged line", "AWS-style keys in the environment",
        "password on a YAML line with a syntax error (reload)",
        "token inside /server_info (api_key, admin_api_key, hf_token)",
    )  # fmt: skip
    secrets = []
    for number, kind in enumerate(kinds, 1):
        values: tuple[str, ...] = (_marker(number),)
        if number == 11:
            values = (key_line,)
        elif number == 16:
            values = (_marker(16, "aws"), _marker(16) + "/aws+Secret")
        secrets.append(Secret(number, kind, values))
    return tuple(secrets)


def leaked(secrets: tuple[Secret, ...], where: dict[str, bytes]) -> dict[int, list[str]]:
    """Kind number -> the outputs holding one of its values, or the first 16 characters of
    one (a value cut short is still a leak)."""
    found: dict[int, list[str]] = {}
    for secret in secrets:
        needles = {v[:16].encode() for v in secret.values}
        for name, text in where.items():
            if any(needle in text for needle in needles):
                found.setdefault(secret.number, []).append(name)
    return found


# -- peers ------------------------------------------------------------------------------------


class QueryAPI:
    """A Prometheus query API on 127.0.0.1 whose answer a row sets (`answer(path) -> bytes`, or
    None: hold the connection and never answer)."""

    def __init__(self) -> None:
        self.answer: Callable[[str], bytes | None] = _empty_result
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                del args

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self.do_POST()

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = api.answer(self.path)
                if body is None:
                    time.sleep(30)
                    self.close_connection = True
                    return
                status = int(body[:3]) if body[:3].isdigit() else 200
                body = body[3:] if body[:3].isdigit() else body
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    self.close_connection = True

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.http.handle_error = _quiet  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def _quiet(*_args: object) -> None:
    """A peer's own errors (the daemon hung up on it) are not the row's business."""


# Every server in this process is a peer of some row (Flapper's too): none prints tracebacks.
socketserver.BaseServer.handle_error = _quiet  # type: ignore[method-assign]


def _empty_result(path: str) -> bytes:
    kind = "matrix" if "query_range" in path else "vector"
    return json.dumps({"status": "success", "data": {"resultType": kind, "result": []}}).encode()


class Receiver:
    """An Alertmanager stand-in recording every body; `status` and `delay_seconds` set by rows."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.status, self.delay_seconds = 200, 0.0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                del args

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                receiver.bodies.append(self.rfile.read(int(self.headers["Content-Length"] or 0)))
                time.sleep(receiver.delay_seconds)
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.http.handle_error = _quiet  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


# -- the shared part: simulated control server, real Alertmanager, keys ------------------------


@dataclass
class Shared:
    """What every row uses: the control server's URL, the real Alertmanager's (or None), the
    secrets and the files that hold them."""

    control_url: str
    alertmanager_url: str | None
    folder: Path
    secrets: tuple[Secret, ...] = ()
    files: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ca = CA(self.folder, "fault-ca")
        pair, server = ca.issue("client", server=False), ca.issue("server")
        self.secrets = plant_secrets(pair.key)
        self.files = {"cert": pair.cert, "key": pair.key, "ca": ca.cert_file,
                      "server_cert": server.cert, "server_key": server.key}  # fmt: skip
        for number, name in ((6, "api_key"), (9, "bearer"), (12, "gw_key"), (14, "prom_pw")):
            self.files[name] = self.folder / name
            self.files[name].write_text(self.value(number) + "\n")

    def value(self, number: int) -> str:
        """The (first) marker of kind `number`."""
        return self.secrets[number - 1].values[0]


@contextmanager
def shared_world(folder: Path) -> Iterator[Shared]:
    """The control server (simulated, its advice firing within seconds) and, when installed,
    one real Alertmanager every row sends to."""
    with ExitStack() as stack:
        fleet = stack.enter_context(
            SimFleet([ServerSpec("retraction_storm")], speed=10.0, warmup_seconds=300.0)
        )
        am_url = None
        if AM_BINARY is not None:
            hook = stack.enter_context(serve(Recorder()))
            (folder / "am").mkdir()
            am = Alertmanager(folder / "am", hook.url)
            am.start()
            stack.callback(am.stop)
            am_url = am.url
        yield Shared(fleet.urls[0], am_url, folder)


# -- one row's world --------------------------------------------------------------------------


class RowDaemon(DaemonProcess):
    """`sglang-tuner run` with the planted environment, and what a row asks of its process:
    standard input, a stepped wall clock, a limit set before it starts."""

    def __init__(self, tmp: Path, config: dict[str, Any], env: dict[str, str]) -> None:
        super().__init__(tmp, config)
        self.env = env
        self.popen: dict[str, Any] = {}

    def start(self, timeout: float = 30.0) -> "RowDaemon":
        cmd = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(self.config_path)]
        with self.log_path.open("ab") as log:
            options = {"stdout": log, "stderr": subprocess.STDOUT, **self.popen}
            self.proc = subprocess.Popen(cmd, env=self.env, **options)  # noqa: S603
        self.wait_for(_answers, timeout=timeout)
        return self


def _answers(daemon: DaemonProcess) -> bool:
    assert daemon.proc is not None
    if daemon.proc.poll() is not None:
        raise RuntimeError(f"daemon exited {daemon.proc.returncode}: {daemon.logs()[-2000:]}")
    try:
        return daemon.get("/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class World:
    """One row: its peers, its config (rows edit `config` before `start`), its daemon."""

    def __init__(self, shared: Shared, tmp: Path) -> None:
        self.shared, self.tmp = shared, tmp
        self.routes: dict[str, Route] = {"secret": self._secret, "gw": self._gateway,
                                         "worker": self._worker}  # fmt: skip
        self.hostile = HostileServer(self.routes).__enter__()
        self.hostile.http.handle_error = _quiet  # type: ignore[method-assign]
        self.prometheus, self.receiver = QueryAPI(), Receiver()
        self.secret_log = tmp / "secret.log"
        self.secret_log.write_text(self._secret_log_text())
        self.config = self._config()
        self.env = self._env()
        self.daemon: RowDaemon | None = None
        self.cleanups: list[Callable[[], None]] = []
        self.expected = ["control", "secret"]  # target names /targets must list
        self.problems: list[str] = []  # a row's own "lost or corrupted" findings
        self.popen: dict[str, Any] = {}  # Popen options of the daemon (stdin, preexec_fn, ...)
        self.log_visible = True  # False where a row sends the daemon's output elsewhere
        self.gateway_expected = True  # False where a row breaks the gateway
        self.scrapes_before = 0  # the control target's successful scrapes when the fault began
        self.gap_expected = False  # a row that stops the daemon on purpose: no gap held against it
        self.longest_gap_seconds = 0.0  # the longest the control's scrapes stood still
        self._watching = threading.Event()

    # the planted config, environment and peers

    def _config(self) -> dict[str, Any]:
        v, files = self.shared.value, self.shared.files
        secret_url = (f"http://ops:{v(1)}@127.0.0.1:{self.hostile.http.server_port}/secret/"
                      f"?token={v(2)}&api_key={v(3)}&access_token={v(4)}&key={v(5)}")  # fmt: skip
        ams = [self.receiver.url]
        if self.shared.alertmanager_url:
            ams.append(self.shared.alertmanager_url)
        return {
            **FAST,
            "targets": [
                {"name": "control", "url": self.shared.control_url},
                {"name": "secret", "url": secret_url, "api_key_file": str(files["api_key"]),
                 "log_file": str(self.secret_log),
                 "tls": {"cert_file": str(files["cert"]), "key_file": str(files["key"])}},
                {"name": "gw", "url": self.hostile.url("gw"), "source": "gateway",
                 "api_key_file": str(files["gw_key"])},
            ],
            "alertmanager": {
                "urls": [u.replace("http://", f"http://am:{v(13)}@") for u in ams],
                "bearer_token_file": str(files["bearer"]), "resend_delay_seconds": 1.0,
                "timeout_seconds": 2.0,
            },
            "prometheus": {
                "url": self.prometheus.url.replace("http://", f"http://prom:{v(10)}@"),
                "basic_auth": {"username": "prom", "password_file": str(files["prom_pw"])},
                "timeout_seconds": 0.4, "backfill": False,
            },
        }  # fmt: skip

    def _env(self) -> dict[str, str]:
        v = self.shared.value
        aws = self.shared.secrets[15].values
        return {**os.environ, "PYTHONPATH": str(DAEMON), "HF_TOKEN": v(8),
                "AWS_ACCESS_KEY_ID": aws[0], "AWS_SECRET_ACCESS_KEY": aws[1]}  # fmt: skip

    def _secret_log_text(self) -> str:
        v = self.shared.value
        aws = self.shared.secrets[15].values
        stamp = "[2026-01-01 00:00:0{}]"
        return "\n".join([
            f"{stamp.format(0)} HF_TOKEN={v(8)} AWS_SECRET_ACCESS_KEY={aws[1]} "
            f"AWS_ACCESS_KEY_ID={aws[0]} python3 -m sglang.launch_server --model-path "
            f"Qwen/Qwen2.5-7B-Instruct --api-key {v(6)} --admin-api-key {v(7)} --hf-token {v(8)}",
            f"{stamp.format(1)} Receive: obj=GenerateReqInput(text='hi'), headers="
            f"{{'Authorization': 'Bearer {v(15)}'}}",
            f"{stamp.format(2)} Authorization: Bearer {v(15)}",
            f"{stamp.format(3)} Decode batch, #running-req: 40, #token: 9000, token usage: 0.30, "
            "cuda graph: True, gen throughput (token/s): 800.00, #queue-req: 7",
        ]) + "\n"  # fmt: skip

    def server_info(self) -> bytes:
        """The fixture's `/server_info` with kind 18 in its key fields."""
        token = self.shared.value(18)
        return json.dumps({**INFO, "api_key": token, "admin_api_key": token,
                           "hf_token": token}).encode()  # fmt: skip

    def _secret(self, _handler: HostileHandler, endpoint: str) -> bytes:
        return self.server_info() if "server_info" in endpoint else PAGE

    def _gateway(self, _handler: HostileHandler, endpoint: str) -> bytes:
        worker = self.hostile.url("worker")
        line = f'sglang_num_running_reqs{{worker_addr="{worker}"}} 3\n'
        return line.encode() if "engine_metrics" in endpoint else b""

    def _worker(self, _handler: HostileHandler, endpoint: str) -> bytes:
        return self.server_info() if "server_info" in endpoint else b""

    # the daemon

    def start(self) -> RowDaemon:
        """Start the daemon on `config`; raises when it does not answer."""
        daemon = RowDaemon(self.tmp, self.config, self.env)
        daemon.popen = self.popen
        self.daemon = daemon
        return daemon.start()

    @property
    def d(self) -> RowDaemon:
        assert self.daemon is not None
        return self.daemon

    def control(self) -> dict[str, Any]:
        return dict(self.d.get("/targets/control", timeout=5).json())

    def control_scrapes(self) -> int:
        return successful_scrapes(self.control())

    def control_advice(self) -> list[dict[str, Any]]:
        answer = self.d.get("/advice", params={"target": "control"}, timeout=5)
        return list(answer.json()["data"])

    def baseline(self, timeout: float = 40.0) -> None:
        """Wait until the control target is scraped and judged (its advice out)."""
        self.d.wait_for(lambda _d: self.control_scrapes() >= 3 and self.control_advice(),
                        timeout=timeout)  # fmt: skip

    def full_config(self) -> dict[str, Any]:
        """The row's config with the daemon's address and database."""
        own = ("listen_host", "listen_port", "database")
        return {**{k: self.d.config[k] for k in own}, **self.config}

    def watch_scrapes(self) -> None:
        """From now until `stop_watching`, time the longest stretch in which the control
        target's successful scrapes did not move (polled every 0.25 s through /targets)."""
        self._watching.set()
        threading.Thread(target=self._watch, daemon=True).start()

    def stop_watching(self) -> None:
        self._watching.clear()

    def _watch(self) -> None:
        last, since = -1, time.monotonic()
        while self._watching.is_set():
            try:
                count = self.control_scrapes()
            except (httpx.HTTPError, ValueError, KeyError):
                count = last
            now = time.monotonic()
            if count != last:
                last, since = count, now
            self.longest_gap_seconds = max(self.longest_gap_seconds, now - since)
            time.sleep(0.25)

    def reload(self, text: str | None = None) -> None:
        """SIGHUP with `text` as the config file (None: the row's config)."""
        if text is None:
            self.d.write_config(self.full_config())
        else:
            self.d.config_path.write_text(text)
        assert self.d.proc is not None
        self.d.proc.send_signal(signal.SIGHUP)

    def closing_reload(self) -> None:
        """Kind 17: a reload with a YAML error on a line holding a password, then the good
        config back."""
        good = yaml.safe_dump(self.full_config())
        broken = good + (f"extra:\n  - url: http://ops:{self.shared.value(17)}@gpu-9:30000\n"
                         "    name: [gpu-9\n")  # fmt: skip
        self.reload(broken)
        try:
            self.d.wait_for(lambda d: "not valid YAML" in d.logs(), timeout=20)
        except AssertionError:
            if self.log_visible:
                self.problems.append("the reload with a YAML error was not logged")
        self.reload()
        time.sleep(1.0)

    def close(self) -> None:
        for cleanup in reversed(self.cleanups):
            cleanup()
        if self.daemon is not None:
            self.daemon.stop()
        self.hostile.__exit__(None, None, None)
        self.prometheus.close()
        self.receiver.close()


# -- verdicts ---------------------------------------------------------------------------------


@dataclass
class Verdict:
    """What a row found: survived, what was lost or corrupted, which kinds leaked where."""

    survived: bool = True
    lost: list[str] = field(default_factory=list)
    leaks: dict[int, list[str]] = field(default_factory=dict)


def alive(world: World) -> str | None:
    """None when the process runs and /healthz answers 200; else why not."""
    proc = world.d.proc
    if proc is None or proc.poll() is not None:
        return f"process exited ({None if proc is None else proc.returncode})"
    try:
        status = world.d.get("/healthz", timeout=5).status_code
    except httpx.HTTPError as exc:
        return f"/healthz: {type(exc).__name__}"
    return None if status == 200 else f"/healthz answered {status}"


def live_losses(world: World) -> list[str]:
    """The control target's scrapes and advice, and every expected target in /targets."""
    lost, scrapes_before = list(world.problems), world.scrapes_before
    scrapes = world.control_scrapes()
    if scrapes < scrapes_before + 3:
        lost.append(f"control scrapes stalled ({scrapes_before} -> {scrapes} successful)")
    elif world.longest_gap_seconds > GAP_SECONDS and not world.gap_expected:
        lost.append(f"control scrapes stood still {world.longest_gap_seconds:.1f} s")
    if not world.control_advice():
        lost.append("control advice gone")
    names = {t["name"] for t in world.d.get("/targets", timeout=10).json()["data"]}
    missing = [n for n in world.expected if n not in names]
    if world.gateway_expected and not any(n.startswith("gw/") for n in names):
        missing.append("gw/<worker>")
    return lost + [f"/targets lacks {', '.join(missing)}"] * bool(missing)


def outputs(world: World) -> dict[str, bytes]:
    """Every output a secret could reach while the daemon runs."""
    seen: dict[str, bytes] = {}
    for path in ANSWERS:
        try:
            seen[path] = world.d.get(path, timeout=10).content
        except httpx.HTTPError:
            seen[path] = b""
    seen["alertmanager payloads"] = b"\n".join(world.receiver.bodies)
    if world.shared.alertmanager_url:
        try:
            alerts = httpx.get(world.shared.alertmanager_url + "/api/v2/alerts", timeout=5)
            seen["Alertmanager alerts"] = alerts.content
        except httpx.HTTPError:
            pass
    return seen


def stored_losses(world: World) -> list[str]:
    """After a SIGTERM: a clean exit, and the control target's samples and advice history in
    a sound SQLite file."""
    proc = world.d.proc
    assert proc is not None
    lost = []
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            lost.append("no exit within 20 s of SIGTERM")
    if proc.returncode not in (0, -signal.SIGKILL) and not lost:
        lost.append(f"exit status {proc.returncode} after SIGTERM")
    return lost + _database_losses(Path(str(world.d.config["database"])))


def _database_losses(path: Path) -> list[str]:
    if not path.exists():
        return ["no database file"]
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            check = db.execute("PRAGMA integrity_check").fetchone()[0]
            samples = db.execute("SELECT count(*) FROM samples WHERE target='control'")
            history = db.execute("SELECT count(*) FROM advice_history WHERE target='control'")
            counts = (samples.fetchone()[0], history.fetchone()[0])
    except sqlite3.Error as exc:
        return [f"database unreadable: {exc}"]
    lost = [f"integrity_check: {check}"] * (check != "ok")
    lost += ["no control samples stored"] * (counts[0] == 0)
    return lost + ["no control advice history stored"] * (counts[1] == 0)


def stored_bytes(world: World) -> dict[str, bytes]:
    """The SQLite files (and any moved aside), and the daemon's log."""
    db = Path(str(world.d.config["database"]))
    files = b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file())
    return {"SQLite file": files, "daemon log": world.d.log_path.read_bytes()}
