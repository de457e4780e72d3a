"""`sglang-tuner check`: a short watch from the terminal prints the advice."""

import json
import subprocess
import sys

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


def _sim_log(path, scenario: str, version: str = "0.5.23", seconds: float = 360.0):
    """The log a simulated server writes over `seconds` (its metrics are not read)."""
    from sglang_sim import SCENARIOS, ServerModel
    from sglang_sim.logs import LogWriter

    config = SCENARIOS[scenario].for_version(version)
    writer = LogWriter(str(path), version, 1_790_000_000.0, dp=config.knobs.dp_size)
    model = ServerModel(config, seed=1, log=writer)
    t = 0.0
    while t < seconds:
        t += 5.0
        model.advance_to(t)
    writer.file.close()
    return path


def test_check_log_replays_a_log_file_at_once(tmp_path, capsys):
    log = _sim_log(tmp_path / "sglang.log", "queue_flood")
    assert main(["check", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert "next change: queue_too_long (below)" in out
    assert out.count("client: slow request submission") == 1  # each advice said once


def test_check_log_reads_standard_input_as_json(tmp_path):
    import subprocess
    import sys

    log = _sim_log(tmp_path / "sglang.log", "prefill_oom", version="0.5.9")
    done = subprocess.run(
        [sys.executable, "-m", "sglang_tuner", "check", "--log", "-", "--format", "json"],
        stdin=log.open("rb"), capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [a["rule"] for a in report["data"]][0] == "prefill_oom"
    assert report["data"][0]["action"]["flag"] == "--chunked-prefill-size"


def test_check_log_flags_the_launch_line_gives_the_current_values(tmp_path, capsys):
    log = tmp_path / "sglang.log"
    lines = [
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1, "
        "schedule_conservativeness=2.0, mem_fraction_static=0.88, api_key='s3cret')",
        "[2026-01-01 00:00:10] max_total_num_tokens=500000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=4096, context_len=8192, "
        "available_gpu_mem=7.00 GB",
    ]
    for i in range(120):  # ten minutes of a queue while the pool stays half empty
        lines.append(
            f"[2026-01-01 00:{1 + i // 12:02d}:{(i % 12) * 5:02d}] Decode batch, "
            "#running-req: 100, #token: 250000, token usage: 0.50, cuda graph: True, "
            "gen throughput (token/s): 3000.00, #queue-req: 300"
        )
    log.write_text("\n".join(lines) + "\n")
    assert main(["check", "--log", str(log)]) == 0
    out = capsys.readouterr().out
    assert "--schedule-conservativeness 2 -> " in out  # the value from the launch line
    assert "s3cret" not in out


def test_check_log_errors_are_clear(tmp_path, capsys):
    assert main(["check", "--log", str(tmp_path / "missing.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
    text = tmp_path / "notes.txt"
    text.write_text("nothing from SGLang here\n")
    assert main(["check", "--log", str(text)]) == 1
    err = capsys.readouterr().err
    assert "holds no SGLang log lines" in err
    assert "judged by line order" not in err  # no word on how the time of nothing was read
    assert "in a form it does not know" not in err
    text.write_text("nothing here\nDecode batch: #running-req 4 (a form no SGLang printed)\n")
    assert main(["check", "--log", str(text)]) == 1
    err = capsys.readouterr().err
    assert "line 2 has SGLang's words in a form it does not know ('Decode batch: #run" in err
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert main(["check", "--log", str(empty)]) == 1
    assert capsys.readouterr().err == f"error: {empty} is empty\n"
    assert main(["check", "http://127.0.0.1:1", "--log", str(text)]) == 2
    assert main(["check"]) == 2


def test_check_log_says_what_a_log_without_a_signal_holds(tmp_path, capsys):
    """A paste of SGLang's lines that carry no tuning signal is refused saying what they are:
    the HTTP server's access lines, or one of SGLang's own messages (from its catalogue)."""
    access = tmp_path / "access.log"
    access.write_text(
        'text before\n[2026-04-05 20:02:52] INFO:     127.0.0.1:40130 - "POST /v1/chat/completions '
        'HTTP/1.1" 200 OK\n[2026-04-05 20:02:53] INFO:     127.0.0.1:40132 - "GET /health '
        'HTTP/1.1" 200 OK\n'
    )
    assert main(["check", "--log", str(access)]) == 1
    err = capsys.readouterr().err
    assert "holds no line with a tuning signal" in err
    assert "the HTTP server's access lines (2, from line 2)" in err
    ready = tmp_path / "ready.log"
    ready.write_text("[2026-04-05 20:00:00] The server is fired up and ready to roll!\n")
    assert main(["check", "--log", str(ready)]) == 1
    err = capsys.readouterr().err
    assert "line 1 is one of SGLang's own messages (info in srt/server.py, 0.1." in err
    assert "Decode/Prefill batch lines" in err


def _check(*argv: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "sglang_tuner", "check", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_check_stops_at_the_first_scrape_when_nothing_listens():
    """A refused connection is known at once: exit 1, the cause said, long before --duration."""
    done = _check(f"http://127.0.0.1:{free_port()}", "--duration", "10m")
    assert done.returncode == 1
    assert "conn_refused" in done.stderr and "connection refused" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_check_stops_at_once_on_a_404_and_on_prometheus_own_metrics_suggests_prometheus(tmp_path):
    from tests.prometheus_process import PROMETHEUS, PrometheusProcess

    with SimFleet([ServerSpec("healthy")], seed=1) as fleet:
        wrong = _check(f"{fleet.urls[0]}/v2/nothing-here/", "--duration", "10m", "--format", "json")
    assert wrong.returncode == 1 and "http_404" in wrong.stderr
    assert "give the SGLang server's own address" in wrong.stderr
    assert json.loads(wrong.stdout)["count"] == 0  # a script still gets its report
    if PROMETHEUS is None:
        return
    prometheus = PrometheusProcess(tmp_path, [])
    try:
        prometheus.wait_for("vector(1)")  # answering queries: its /metrics is served
        done = _check(f"{prometheus.url}/metrics", "--duration", "10m")
    finally:
        prometheus.stop()
    assert done.returncode == 1 and "not_sglang" in done.stderr
    assert f"sglang-tuner check --prometheus {prometheus.url}" in done.stderr
