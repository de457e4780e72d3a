"""`sglang-tuner check --log` on what users paste: a two-line excerpt judged at low confidence,
logs from docker compose, kubectl and journalctl read at their own times, and logs without
dates never dated 1970."""

import json
import os
from pathlib import Path

import pytest
from sglang_tuner.__main__ import main

# SGLang 0.4.7+'s retraction line (tests/fixtures/sglang/logs/corpus: same format)
RETRACT = (
    "[2025-08-11 17:20:{s:02d} TP0] KV cache pool is full. Retract requests. "
    "#retracted_reqs: {n}, #new_token_ratio: 0.9998 -> 1.0000"
)
DECODE = (
    "[2025-08-11 17:20:{s:02d} TP0] Decode batch, #running-req: 48, #token: 307481, "
    "token usage: 1.00, cuda graph: True, gen throughput (token/s): 10.92, #queue-req: 3"
)
MTIME = 1754932900.0  # 2025-08-11 17:21:40 UTC


def _log(tmp_path, lines, name="excerpt.log"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    os.utime(path, (MTIME, MTIME))
    return str(path)


def test_check_log_two_retraction_lines_name_the_problem_at_low_confidence(tmp_path, capsys):
    log = _log(tmp_path, [RETRACT.format(s=3, n=1), RETRACT.format(s=9, n=2)])
    assert main(["check", "--log", log]) == 0
    out = capsys.readouterr().out
    assert "retractions_frequent" in out and "low confidence" in out
    assert "judged on 2 lines (6 s of log time; a window is 300 s)" in out
    assert "evaluated 2025-08-11T17:20:09Z" in out


@pytest.mark.parametrize(
    "paste",
    [
        lambda lines: [f"    {line}" for line in lines],  # a code block indented in a list
        lambda lines: [f"> {line}" for line in lines],  # a quote in a reply
        lambda lines: [" ".join(lines)],  # a paste whose newlines were lost
        lambda lines: [f"{n:>4}  {line}" for n, line in enumerate(lines, 1)],  # numbered
    ],
    ids=["indented", "quoted", "newlines lost", "numbered"],
)
def test_check_log_reads_an_excerpt_as_a_thread_pastes_it(tmp_path, capsys, paste):
    lines = [DECODE.format(s=1), RETRACT.format(s=3, n=1), RETRACT.format(s=9, n=2)]
    assert main(["check", "--log", _log(tmp_path, paste(lines))]) == 0
    out = capsys.readouterr().out
    assert "retractions_frequent" in out and "low confidence" in out
    assert "evaluated 2025-08-11T17:20:09Z" in out


def test_check_log_a_batch_line_at_full_pool_and_a_retraction_as_json(tmp_path, capsys):
    log = _log(tmp_path, [DECODE.format(s=1), RETRACT.format(s=2, n=1)])
    assert main(["check", "--log", log, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    retraction = next(a for a in report["data"] if a["rule"] == "retractions_frequent")
    assert retraction["confidence"] == "low"
    assert retraction["evidence"].endswith("judged on 2 lines (1 s of log time; a window is 300 s)")


def test_check_log_reads_each_wrappers_time(tmp_path, capsys):
    wrapped = {
        "compose -t": "sglang-1  | 2025-08-11T17:20:{s:02d}.000000000Z {line}",
        "kubectl --timestamps": "2025-08-11T17:20:{s:02d}.000000000Z {line}",
        "journalctl": "Aug 11 17:20:{s:02d} gpu-node-1 python3[48213]: {line}",
        "CRI": "2025-08-11T17:20:{s:02d}.000000000Z stderr F {line}",
    }
    for tool, form in wrapped.items():
        lines = [
            form.format(s=s, line=(RETRACT.format(s=s, n=1) if s % 2 else DECODE.format(s=s)))
            .replace("[2025-08-11 17:20", "[2025-08-11 03:20")  # SGLang's local time: not read
            for s in range(0, 40)
        ]  # fmt: skip
        assert main(["check", "--log", _log(tmp_path, lines)]) == 0, tool
        out = capsys.readouterr().out
        assert "evaluated 2025-08-11T17:20:39Z" in out, tool
        assert "retractions_frequent" in out, tool


def test_check_log_time_only_stamps_are_dated_from_the_file_and_said_once(tmp_path, capsys):
    lines = [DECODE.format(s=s).replace("2025-08-11 ", "") for s in range(0, 30)]
    assert main(["check", "--log", _log(tmp_path, lines)]) == 0
    captured = capsys.readouterr()
    assert "evaluated 2025-08-11T17:20:29Z" in captured.out
    assert captured.err.count("time-only stamps dated 2025-08-11") == 1


def test_check_log_without_timestamps_judges_by_line_order_never_1970(tmp_path, capsys):
    undated = [RETRACT.format(s=0, n=1).split("] ", 1)[1]] * 2
    assert main(["check", "--log", _log(tmp_path, undated)]) == 0
    captured = capsys.readouterr()
    assert "1970" not in captured.out
    assert "evaluated 2025-08-11T17:21:40Z" in captured.out  # the file's modification time
    assert captured.err.count("no timestamps: judged by line order") == 1
    assert "retractions_frequent" in captured.out


def test_check_log_takes_an_interval_below_the_scrape_timeout(tmp_path, capsys):
    log = _log(tmp_path, [RETRACT.format(s=3, n=1), RETRACT.format(s=9, n=2)])
    assert main(["check", "--log", log, "--interval", "1"]) == 0
    assert "retractions_frequent" in capsys.readouterr().out


def test_check_log_explain_says_why_each_rule_gave_no_advice(tmp_path, capsys):
    # every Prefill batch cut at one 2048-token budget while requests queue: the queue waits on
    # the prefill budget, so the guide's "conservativeness down" is held back, and --explain
    # says so where the plain report has nothing to show
    prefill = (
        "[2025-08-11 17:20:{s:02d} TP0] Prefill batch. #new-seq: 2, #new-token: {t}, "
        "#cached-token: 0, token usage: 0.30, #running-req: 60, #queue-req: 130"
    )
    lines = [prefill.format(s=s, t=2048 - s % 3) for s in range(0, 40)]
    log = _log(tmp_path, lines)
    assert main(["check", "--log", log]) == 0
    plain = capsys.readouterr().out
    assert "every rule, per server" not in plain
    assert main(["check", "--log", log, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "every rule, per server (--explain):" in out
    assert "  scheduler_too_conservative: passed: 100% of the Prefill batch lines are cut" in out
    assert "  retractions_frequent: passed" in out
    assert "  mem_fraction_too_low: no data: " in out


def test_check_log_takes_the_gpu_model_the_log_does_not_name(tmp_path, capsys):
    log = Path(__file__).resolve().parents[1] / "fixtures" / "sglang" / "logs" / "v0.5.17.log"
    assert main(["check", "--log", str(log)]) == 0
    unknown = capsys.readouterr().out
    assert "GPU model unknown: give it as check --gpu-model NAME" in unknown
    assert main(["check", "--log", str(log), "--gpu-model", "NVIDIA H100 80GB HBM3"]) == 0
    assert "GPU model unknown" not in capsys.readouterr().out


def test_check_log_reads_a_log_pasted_newest_first_in_the_order_it_was_written(tmp_path, capsys):
    """Grafana's and Cloud Logging's viewers list the newest line first: the crash that ended
    the server is the top line, and it is still what the log ends in."""
    lines = [RETRACT.format(s=s, n=1) if s % 2 else DECODE.format(s=s) for s in range(0, 40)]
    lines += [
        "[2025-08-11 17:20:41 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/srt/managers/scheduler.py", line 1, in event_loop_normal',
        "    self.run_batch(batch)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.20 GiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 310.00 MiB is free.",
    ]
    assert main(["check", "--log", _log(tmp_path, list(reversed(lines)))]) == 0
    captured = capsys.readouterr()
    assert "evaluated 2025-08-11T17:20:41Z" in captured.out  # its newest line, not its oldest
    assert "decode_oom" in captured.out and "retractions_frequent" in captured.out
    assert captured.err.count("newest first (its times run backwards): read oldest first") == 1


def test_check_log_names_a_crash_cloud_logging_listed_newest_first(tmp_path, capsys):
    """Cloud Logging prints each line of a traceback as an entry of its own behind its severity
    and time, newest first: the load-time KeyError at the top is still the crash's exception."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/sgl/srt/managers/scheduler.py", line 1999, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
        '  File "/sgl/srt/models/llama.py", line 547, in load_weights',
        "    param = params_dict[name]",
        "KeyError: 'model.layers.78.mlp.gate_up_proj.input_scale'",
    ]
    entries = [f"ERROR 2025-04-04T06:24:51.{k:03d}000000Z {line}" for k, line in enumerate(lines)]
    assert main(["check", "--log", _log(tmp_path, list(reversed(entries)))]) == 0
    captured = capsys.readouterr()
    assert "evaluated 2025-04-04T06:24:51Z" in captured.out
    assert "KeyError: 'model.layers.78.mlp.gate_up_proj.input_scale'" in captured.out
    assert "model or quantization incompatibility" in captured.out
    assert "newest first (its times run backwards): read oldest first" in captured.err


def test_check_log_reads_a_file_back_from_its_end_line_for_line(tmp_path):
    from sglang_tuner.cli.check import _last_first, _lines

    for k, text in enumerate(("", "\n", "a", "a\n", "a\n\nb", "é\nb\n\n", "x" * 10 + "\ny\n")):
        path = tmp_path / f"{k}.log"
        path.write_text(text, encoding="utf-8")
        lines = text.split("\n")[:-1] if text.endswith("\n") else text.split("\n") if text else []
        with path.open("rb") as handle:
            assert list(_lines(handle, chunk_bytes=3)) == lines, repr(text)
        assert list(_last_first(str(path), chunk_bytes=2)) == lines[::-1], repr(text)
