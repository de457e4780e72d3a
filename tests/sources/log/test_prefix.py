"""The wrapping tools put around SGLang's lines, taken off: each sample is written the way the
tool's documentation shows its output, around a real SGLang line (0.4.7+ retraction)."""

import dataclasses
import json
import time
from datetime import date, datetime, timezone
from pathlib import Path

import pytest
from sglang_tuner.sources.log.lines import LogCounts, line_seconds, scan_lines
from sglang_tuner.sources.log.log_samples import log_samples
from sglang_tuner.sources.log.prefix import (
    MAX_JSON_CHARS,
    pasted_lines,
    split_joined,
    split_traceback,
    unwrap,
    unwrap_lines,
)

LINE = (
    "[2025-08-11 17:20:03 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
    "#new_token_ratio: 0.9998 -> 1.0000"
)
TS = 1754932803.0  # 2025-08-11T17:20:03Z (a Monday)
NANO = "2025-08-11T17:20:03.123456789Z"

# (tool, the line as it prints it, the time it stamped, the process it names)
SAMPLES = [
    ("docker compose logs", f"sglang-1  | {LINE}", None, "sglang-1"),
    ("docker-compose v1", f"sglang_1     | {LINE}", None, "sglang_1"),
    ("docker compose logs -t", f"sglang-1  | {NANO} {LINE}", TS + 0.123456789, "sglang-1"),
    ("compose colours", f"\x1b[36msglang-1  |\x1b[0m {LINE}", None, "sglang-1"),
    ("journalctl (short)", f"Aug 11 17:20:03 gpu-node-1 python3[48213]: {LINE}", TS, "python3"),
    (
        "journalctl -o short-precise",
        f"Aug 11 17:20:03.123456 gpu-node-1 python3[48213]: {LINE}",
        TS + 0.123456,
        "python3",
    ),
    (
        "journalctl -o short-iso",
        f"2025-08-11T17:20:03+0000 gpu-node-1 sglang[7]: {LINE}",
        TS,
        "sglang",
    ),
    (
        "journalctl -o short-iso-precise",
        f"2025-08-11T19:20:03.123456+02:00 gpu-node-1 sglang[7]: {LINE}",
        TS + 0.123456,
        "sglang",
    ),
    (
        "journalctl -o short-full",
        f"Mon 2025-08-11 17:20:03 UTC gpu-node-1 python3[48213]: {LINE}",
        TS,
        "python3",
    ),
    (
        "journalctl -o short-unix",
        f"1754932803.500000 gpu-node-1 python3[48213]: {LINE}",
        TS + 0.5,
        "python3",
    ),
    ("kubectl logs --timestamps", f"{NANO} {LINE}", TS + 0.123456789, ""),
    ("docker logs -t", f"2025-08-11T17:20:03.000000000Z {LINE}", TS, ""),
    ("kubectl logs --prefix", f"[pod/sglang-0/sglang] {LINE}", None, "sglang-0/sglang"),
    ("Ray worker", f"(SGLangEngine pid=4711) {LINE}", None, "SGLangEngine pid=4711"),
    (
        "Ray worker with its node, deduplicated",
        f"(Scheduler pid=9, ip=10.0.0.2) {LINE} [repeated 3x across cluster]",
        None,
        "Scheduler pid=9",
    ),
    ("CRI (containerd, CRI-O)", f"{NANO} stderr F {LINE}", TS + 0.123456789, ""),
    (
        "docker json-file",
        json.dumps({"log": LINE + "\n", "stream": "stderr", "time": NANO}),
        TS + 0.123456789,
        "",
    ),
    (
        "journalctl -o json",
        json.dumps(
            {
                "__REALTIME_TIMESTAMP": "1754932803123456",
                "_HOSTNAME": "gpu-node-1",
                "SYSLOG_IDENTIFIER": "python3",
                "_SYSTEMD_UNIT": "sglang.service",
                "MESSAGE": LINE,
            }
        ),  # fmt: skip
        TS + 0.123456,
        "sglang.service",
    ),
    (
        "fluent-bit (tail + docker parser)",
        json.dumps(
            {"date": 1754932803.25, "log": LINE, "stream": "stderr", "container_name": "/sglang"}
        ),  # fmt: skip
        TS + 0.25,
        "/sglang",
    ),
    (
        "vector (docker_logs source)",
        json.dumps(
            {
                "container_name": "sglang",
                "message": LINE,
                "source_type": "docker_logs",
                "stream": "stderr",
                "timestamp": "2025-08-11T17:20:03.25Z",
            }
        ),  # fmt: skip
        TS + 0.25,
        "sglang",
    ),
    (
        "Loki logcli --output=jsonl",
        json.dumps(
            {"labels": {"container": "sglang", "namespace": "llm"}, "line": LINE, "timestamp": NANO}
        ),  # fmt: skip
        TS + 0.123456789,
        "sglang",
    ),
    (
        "fluent-bit CRI lines from /var/log/containers (no CRI parser)",
        json.dumps({"log": f"{NANO} stdout F {LINE}", "kubernetes": {"pod_name": "sglang-0"}}),
        TS + 0.123456789,
        "sglang-0",
    ),
    ("a wrapper's dated bracket", f"[2025-08-11 17:20:03] {LINE}", TS, ""),
    (
        "Loki logcli query (default output)",
        f'{NANO} {{container="sglang", namespace="llm"}} {LINE}',
        TS + 0.123456789,
        "sglang",
    ),
    (
        "Loki logcli query, tab-separated",
        f'{NANO}\t{{pod="sglang-0"}}\t{LINE}',
        TS + 0.123456789,
        "sglang-0",
    ),
    (
        "Google Cloud Logging export",
        json.dumps(
            {
                "insertId": "x1",
                "textPayload": LINE,
                "timestamp": NANO,
                "severity": "INFO",
                "resource": {"type": "k8s_container"},
            }
        ),  # fmt: skip
        TS + 0.123456789,
        "",
    ),
    (
        "Google Cloud Logging, printed (console, gcloud --format)",
        f"INFO {NANO} {LINE}",
        TS + 0.123456789,
        "",
    ),
    (
        "OpenTelemetry collector (file exporter, flattened)",
        json.dumps({"Timestamp": NANO, "Body": LINE, "time": NANO}),
        TS + 0.123456789,
        "",
    ),
]


@pytest.mark.parametrize(("tool", "wrapped", "ts", "stream"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_unwrap_gives_sglangs_line_and_the_stamp(tool, wrapped, ts, stream):
    text, stamped, named = unwrap(wrapped, 2025)
    assert text == LINE, tool
    assert stamped == (pytest.approx(ts, abs=1e-6) if ts is not None else None)
    assert named == stream


def test_unwrap_leaves_sglangs_own_lines_alone():
    for line in (
        LINE,
        "[2025-08-11 17:20:03.123 DP1 TP3] Decode batch, #running-req: 3",
        "[15:54:17 TP0] Decode batch. #running-req: 3",
        "Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 9, in f',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "Killed",
    ):
        assert unwrap(line) == (line, None, "")


def test_unwrap_cloud_loggings_severity_and_stamp_before_each_line_of_a_traceback():
    stamp = "2025-04-04T06:24:51.493646621Z"
    assert unwrap(f"ERROR {stamp} KeyError: 'model.layers.78.input_scale'") == (
        "KeyError: 'model.layers.78.input_scale'",
        pytest.approx(1743747891.493646621, abs=1e-6),
        "",
    )
    frame = '  File "/sgl/srt/models/llama.py", line 547, in load_weights'
    assert unwrap(f"ERROR {stamp} {frame}").text == frame  # its indentation kept
    for text in ("ERROR: CUDA out of memory", "NOTICE 12 requests", "WARNING 2025 was a year"):
        assert unwrap(text).text == text  # a word alone, or no stamp after it: the line's own


def test_unwrap_journal_short_has_no_year_without_one():
    assert unwrap(f"Aug 11 17:20:03 gpu-node-1 python3[48213]: {LINE}") == (LINE, None, "python3")


def test_unwrap_restores_a_prefix_whose_bracket_a_paste_lost():
    cut = "2026-05-24 03:51:44 TP0] Decode batch, #running-req: 4, #full token: 2642688"
    assert unwrap(cut).text == "[" + cut


def test_unwrap_reads_text_that_only_looks_wrapped_as_text():
    long_json = '{"log": "' + "x" * MAX_JSON_CHARS + '"}'
    assert unwrap(long_json).text == long_json  # not parsed: bounded work per line
    assert unwrap('{"level": "info"}').text == '{"level": "info"}'  # no message field
    assert unwrap("[1, 2, 3]").text == "[1, 2, 3]"
    name = "a" * 200_000
    assert unwrap(name).text == name
    assert unwrap(name + " |").text == name + " |"  # no service has such a name
    assert unwrap("sglang-1  |").text == ""  # compose's prefix of an empty line


# -- real logs in every wrapping read as the plain log -----------------------------------------
LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
REAL = [
    "v0.5.9.log",  # every line kind of one format generation, a KV-pool crash with its lines
    "corpus/dsv3-long-output-usage-1.00-then-retract.log",  # a thread's log: TP ranks' copies
    "crashes/v0.5.9_prefill_oom_assembled.log",  # a traceback, unprefixed lines
]
_EPOCH = date(1970, 1, 1).toordinal() * 86400.0


def _stamped(lines: list[str]) -> list[tuple[str, float]]:
    """Each line with a Unix time: its SGLang prefix's, else the line before's."""
    out, ts = [], 0.0
    for line in lines:
        seconds = line_seconds(line)
        ts = seconds - _EPOCH if seconds is not None and seconds > 86400 else ts
        out.append((line, ts))
    return out


def _loads_by_value(counts: LogCounts) -> LogCounts:
    """The counts with each scheduler's load keyed by its place (a stream names it besides)."""
    return dataclasses.replace(counts, load=dict(enumerate(counts.load.values())))


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


WRAPPERS = {
    "compose": lambda line, _ts: f"sglang-1  | {line}",
    "compose -t, coloured": lambda line, ts: f"\x1b[36msglang-1  |\x1b[0m {_iso(ts)} {line}",
    "kubectl --timestamps": lambda line, ts: f"{_iso(ts)} {line}",
    "kubectl --prefix": lambda line, _ts: f"[pod/sglang-0/sglang] {line}",
    "Ray worker": lambda line, _ts: f"(SGLangEngine pid=4711) {line}",
    "CRI": lambda line, ts: f"{_iso(ts)} stderr F {line}",
    "journalctl": lambda line, ts: (
        time.strftime("%b %d %H:%M:%S gpu-1 python3[7]: ", time.gmtime(ts)) + line
    ),  # fmt: skip
    "docker json-file": lambda line, ts: json.dumps(
        {"log": line + "\n", "stream": "stderr", "time": _iso(ts)}
    ),
    "journalctl -o json": lambda line, ts: json.dumps(
        {"__REALTIME_TIMESTAMP": str(int(ts * 1e6)), "MESSAGE": line, "_SYSTEMD_UNIT": "s"}
    ),
    "Loki logcli": lambda line, ts: f'{_iso(ts)} {{container="sglang"}} {line}',
    "Cloud Logging": lambda line, ts: json.dumps({"textPayload": line, "timestamp": _iso(ts)}),
}


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("wrapper", list(WRAPPERS))
def test_a_real_log_in_every_wrapping_reads_as_the_plain_log(name, wrapper):
    plain = (LOGS / name).read_text().splitlines()
    wrapped = [WRAPPERS[wrapper](line, ts) for line, ts in _stamped(plain)]
    assert _loads_by_value(scan_lines(wrapped)) == _loads_by_value(scan_lines(plain))
    year = time.gmtime(_stamped(plain)[-1][1]).tm_year
    assert [u.text for u in map(unwrap, wrapped, [year] * len(wrapped))] == plain
    times = [x.ts for x in log_samples(wrapped, 5.0)]
    assert times == [x.ts for x in log_samples(plain, 5.0)]


# What a paste in an issue thread, a chat or an e-mail puts around each line of a log
PASTES = {
    "indented (a markdown code block in a list)": lambda _n, line: f"    {line}",
    "quoted (markdown, e-mail)": lambda _n, line: f"> {line}",
    "quoted twice": lambda _n, line: f"> > {line}",
    "a list item": lambda _n, line: f"- {line}",
    "a diff's added line, indented": lambda _n, line: f"+         {line}",
    "cat -n": lambda n, line: f"{n:6d}\t{line}",
    "an editor's gutter": lambda n, line: f"{n:4d} | {line}",
    "inline code": lambda _n, line: f"`{line}`",
    "HTML source, indented": lambda _n, line: (
        "  "
        + line.replace("&", "&amp;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
        .replace(">", "&gt;")
        .replace("<", "&lt;")
    ),
}


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("paste", list(PASTES))
def test_a_real_log_pasted_in_every_way_reads_as_the_plain_log(name, paste):
    plain = (LOGS / name).read_text().splitlines()
    pasted = [PASTES[paste](n, line) for n, line in enumerate(plain, 1)]
    assert _loads_by_value(scan_lines(pasted)) == _loads_by_value(scan_lines(plain))
    times = [x.ts for x in log_samples(pasted, 5.0)]
    assert times == [x.ts for x in log_samples(plain, 5.0)]


@pytest.mark.parametrize("wrapper", ["compose", "kubectl --timestamps", "CRI", "journalctl"])
def test_a_wrapped_log_whose_newlines_were_lost_reads_as_the_wrapped_lines(wrapper):
    """Each line's wrapper lands at the end of the line before when the newlines go: it goes
    with the line it wrapped again (the last field of a batch line read as it was)."""
    plain = (LOGS / REAL[1]).read_text().splitlines()
    wrapped = [WRAPPERS[wrapper](line, ts) for line, ts in _stamped(plain)]
    joined = [" ".join(wrapped)]
    assert _loads_by_value(scan_lines(joined)) == _loads_by_value(scan_lines(wrapped))


def test_a_paste_whose_newlines_were_lost_reads_as_the_lines_it_held():
    plain = (LOGS / REAL[1]).read_text().splitlines()
    joined = [" ".join(plain[i : i + 4]) for i in range(0, len(plain), 4)]
    assert len(joined) < len(plain)
    assert scan_lines(joined) == scan_lines(plain)
    assert [x.ts for x in log_samples(joined, 5.0)] == [x.ts for x in log_samples(plain, 5.0)]


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("name", REAL[:2])
def test_lines_a_terminal_cut_at_its_width_read_as_the_plain_log(name, width):
    plain = (LOGS / name).read_text().splitlines()
    batch = [line for line in plain if "#queue-req: " in line or "#retracted_reqs: " in line]
    cut = [line[i : i + width] for line in batch for i in range(0, len(line), width)]
    assert len(cut) > len(batch)
    assert list(pasted_lines(cut)) == batch
    assert scan_lines(cut) == scan_lines(batch)


TRACEBACK = [
    "[2025-04-22 15:12:46 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/sglang/srt/managers/scheduler.py", line 2011, in run_scheduler_process',
    "    scheduler.event_loop_normal()",
    '  File "/opt/sglang/srt/model_executor/cuda_graph_runner.py", line 436, in capture',
    "    ) = self.capture_one_batch_size(bs, forward)",
    "RuntimeError: CUDA error: operation not permitted when stream is capturing",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "/opt/sglang/srt/model_executor/cuda_graph_runner.py", line 338, in __init__',
    "    raise Exception(",
    "Exception: Capture cuda graph failed: CUDA error: operation not permitted",
]


def test_a_traceback_whose_newlines_were_lost_reads_as_python_printed_it():
    joined = " ".join(TRACEBACK)
    assert split_traceback(joined) == [line for line in TRACEBACK if line]
    assert list(pasted_lines([joined])) == [line for line in TRACEBACK if line]
    assert scan_lines([joined]) == scan_lines(TRACEBACK)


@pytest.mark.parametrize("width", [60, 80, 120])
def test_a_traceback_a_terminal_cut_at_its_width_reads_as_python_printed_it(width):
    venv = "/home/user/venvs/serving/lib/python3.12/site-packages/sglang/"
    long = [line.replace("/opt/sglang/", venv) for line in TRACEBACK if line]
    cut = [line[i : i + width] for line in long for i in range(0, len(line), width)]
    frames = [line for line in long if 'File "' in line]
    assert len(cut) > len(long)
    assert [line for line in pasted_lines(cut) if 'File "' in line] == frames
    assert scan_lines(cut) == scan_lines(long)


def test_a_bare_exception_name_ending_a_joined_traceback_is_its_exception_line():
    tb = ["Traceback (most recent call last):"]
    tb += ['  File "/sgl/srt/mem_cache/allocator.py", line 215, in available_size']
    tb += ["    raise NotImplementedError()", "NotImplementedError"]
    assert split_traceback(" ".join(tb)) == tb
    # the code of a frame cut before its exception is no exception line
    cut = tb[:-1]
    cut[-1] = "    raise NotImplementedError"
    assert split_traceback(" ".join(cut)) == cut


def test_a_line_that_only_names_a_file_is_never_joined_with_the_next():
    lines = ['ERROR: File "config.json', '  File "/x.py", line 3, in f', "    f()"]
    assert list(pasted_lines(lines)) == lines


def test_a_line_with_no_frame_inside_it_is_not_split_as_a_traceback():
    for line in (TRACEBACK[0], TRACEBACK[1], 'File "x.py" not found: RuntimeError: y', "a b"):
        assert split_traceback(line) == [line]


def test_an_exception_line_before_sglangs_prefix_is_a_line_of_its_own_not_a_wrapper():
    exception = "CUDA Error: an illegal memory access was encountered (CUDA Error: 700)"
    assert split_joined(f"{exception} {TRACEBACK[0]}") == [exception, TRACEBACK[0]]
    wrapped = f"sglang-1  | {LINE}"  # a wrapper's text before SGLang's prefix stays with it
    assert split_joined(wrapped) == [wrapped]


@pytest.mark.parametrize("decoration", ["    ", "> ", "   12  ", "- "])
def test_a_pasted_0_1_batch_line_reads_as_the_plain_one(decoration):
    fill = (
        "new fill batch. #seq: 1. #cached_token: 330. #new_token: 2172. #remaining_req: 57. "
        "#running_req: 9. tree_cache_hit_rate: 69.16%"
    )
    decode = "#running-req: 9, #token: 4360, token usage: 0.05, gen throughput (token/s): 390.20, #queue-req: 57"  # fmt: skip  # noqa: E501
    plain = [fill, decode]
    assert scan_lines([decoration + line for line in plain]) == scan_lines(plain)
    assert scan_lines(plain).prefill_lines == 1


@pytest.mark.parametrize("decorate", [
    lambda _, line: "    " + line,  # a markdown code block
    lambda k, line: f"{k + 1:6d}\t{line}",  # cat -n
    lambda k, line: f"{k + 1:4d} | {line}",  # an editor's gutter
    lambda _, line: "> " + line,
])  # fmt: skip
def test_a_paste_decorates_every_line_and_every_line_loses_it(decorate):
    """Behind a log tool's wrapper (docker compose here) a decorated line opens with no log
    line's start; the decoration the paste showed on its first line is taken off them all."""
    plain = [f"sglang-1  | {line}" for line in (LOGS / REAL[0]).read_text().splitlines()]
    decorated = [decorate(k, line) for k, line in enumerate(plain)]
    assert scan_lines(decorated) == scan_lines(plain)
    assert scan_lines(plain).decode_lines > 0


def test_a_cut_piece_is_joined_only_where_it_completes_the_line():
    cut = "[2025-06-01 10:00:00 TP0] Decode batch. #running-req: 36, #token: 120000, token"
    http = 'INFO:     127.0.0.1:60028 - "POST /generate HTTP/1.1" 200 OK'
    assert list(pasted_lines([cut, http, "[2025-06-01 10:00:01 TP0] x"])) == [
        cut,
        http,
        "[2025-06-01 10:00:01 TP0] x",
    ]
    assert list(pasted_lines([cut, "  File x"])) == [cut, "  File x"]


def test_split_joined_keeps_a_request_logs_prompt_whole():
    line = (
        "[2025-06-01 10:00:00 TP0] Receive: obj=GenerateReqInput(text='why does my log say "
        "[2025-06-01 09:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 9 "
        "and [2025-06-01 09:00:01 TP0] Decode batch. #running-req: 1, #token: 9, token usage: "
        "1.00, gen throughput (token/s): 1.00, #queue-req: 0')"
    )
    assert split_joined(line) == [line]
    assert scan_lines([line]).retracted_reqs == 0


@pytest.mark.parametrize(
    "line",
    [
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2045',
        "    raise RuntimeError(msg)",
        "- a list item that is not a log line",
        "  12 apples",
    ],
)
def test_a_decoration_before_text_that_is_no_log_line_stays(line):
    assert unwrap(line).text == line


@pytest.mark.parametrize(
    "wrapped",
    [
        "2025-12-04 20:35:53 INFO 151972 [scheduler_metrics_mixin.py:287] Decode batch. "
        "#running-req: 48",
        "2025-12-04 20:35:53,120 - sglang.srt.managers.scheduler - INFO - Decode batch. "
        "#running-req: 48",
        "2025-12-04 20:35:53.120 INFO:sglang.srt.managers.scheduler:Decode batch. #running-req: 48",
        "2025-12-04 20:35:53,120 [INFO] sglang.srt.managers.scheduler_metrics_mixin: Decode batch. "
        "#running-req: 48",
        "[2025-12-04 20:35:53][scheduler_metrics_mixin.py:287][INFO]: Decode batch. "
        "#running-req: 48",
        "[2025-12-04 20:35:53,120][INFO] Decode batch. #running-req: 48",
    ],
)
def test_unwrap_reads_python_loggings_layouts_around_sglangs_message(wrapped):
    text, ts, _stream = unwrap(wrapped)
    assert text == "[2025-12-04 20:35:53] Decode batch. #running-req: 48"
    assert (
        ts is not None
        and abs(ts - datetime(2025, 12, 4, 20, 35, 53, tzinfo=timezone.utc).timestamp()) < 1
    )


def test_python_logging_with_sglangs_rank_tags_keeps_each_dp_rank_its_own_scheduler():
    # `%(asctime)s %(levelname)s %(process)d [<ranks> %(filename)s:%(lineno)d]`, with or
    # without a space after the bracket: the ranks stay where SGLang's own prefix holds them
    lines = [
        f"2025-10-29 02:27:35 INFO 89{rank:02d} [{pad}DP{rank} TP{rank} EP{rank} "
        f"scheduler_metrics_mixin.py:222] Decode batch. #running-req: {40 + rank}, #token: "
        f"5712, token usage: 0.76, cuda graph: True, gen throughput (token/s): 740.64, "
        f"#queue-req: {rank}, "
        for rank, pad in ((3, " "), (9, ""))
    ]
    texts = [unwrap(line).text for line in lines]
    assert texts[0].startswith("[2025-10-29 02:27:35 DP3 TP3 EP3] Decode batch. ")
    assert texts[1].startswith("[2025-10-29 02:27:35 DP9 TP9 EP9] Decode batch. ")
    load = scan_lines(lines).load
    assert {rank: (b.running, b.queued) for rank, b in load.items()} == {
        "3": (43, 3), "9": (49, 9),
    }  # fmt: skip


def test_a_notebooks_saved_outputs_read_as_the_lines_they_hold():
    # an executed .ipynb keeps each printed line as a JSON string in its "text" array
    own = [
        "[2024-11-01 07:53:49 TP0] Prefill batch. #new-seq: 1, #new-token: 8, #cached-token: 1, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0",
        '[2024-11-01 07:53:50] INFO:     127.0.0.1:46400 - "POST /v1/completions HTTP/1.1" 200 OK',
        "[2024-11-01 07:53:50 TP0] Decode batch. #running-req: 1, #token: 65, token usage: 0.00, "
        "gen throughput (token/s): 142.05, #queue-req: 0",
    ]
    notebook = ['   "outputs": [', "    {", '     "text": [']
    notebook += [f"      {json.dumps(line + chr(10))}," for line in own[:-1]]
    notebook += [f"      {json.dumps(own[-1] + chr(10))}", "     ]", "    }"]
    assert [u.text for u in unwrap_lines(notebook)][3:6] == own
    assert _loads_by_value(scan_lines(notebook)) == _loads_by_value(scan_lines(own))
    assert [x.ts for x in log_samples(notebook, 5.0)] == [x.ts for x in log_samples(own, 5.0)]
    # a whole line that is a JSON string is its text; indented, only where a log line is in it;
    # text that opens with a quoted word is left alone
    assert unwrap('"hello",').text == "hello"
    assert unwrap('      "hello",').text == '      "hello",'
    assert unwrap('"quoted" and more').text == '"quoted" and more'


def test_a_log_in_python_loggings_bracketed_layout_reads_as_sglangs_own():
    messages = [
        "Decode batch. #running-req: 118, #token: 91000, token usage: 0.99, cuda graph: True, "
        "gen throughput (token/s): 2050.00, #queue-req: 44",
        "KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio: "
        "0.5000 -> 0.8000",
    ]
    own = [f"[2025-06-01 10:00:0{i}] {m}" for i, m in enumerate(messages)]
    bracketed = [
        f"[2025-06-01 10:00:0{i}][scheduler.py:{1200 + i}][{level}]: {m}"
        for i, (m, level) in enumerate(zip(messages, ("INFO", "WARNING"), strict=True))
    ]
    assert [u.text for u in map(unwrap, bracketed)] == own
    assert _loads_by_value(scan_lines(bracketed)) == _loads_by_value(scan_lines(own))
    assert [x.ts for x in log_samples(bracketed, 5.0)] == [x.ts for x in log_samples(own, 5.0)]


@pytest.mark.parametrize(
    ("wrapped", "text", "ts"),
    [
        # another framework's logging config around an embedded SGLang: vLLM's layout
        ("INFO 08-11 17:20:03 [scheduler.py:1200] " + LINE[26:], "[17:20:03] " + LINE[26:], None),
        ("svc=sglang level=info ts=2025-08-11T17:20:03Z " + LINE[26:],
         "[2025-08-11 17:20:03] " + LINE[26:], TS),
        ("2025/08/11 17:20:03.250 worker-3 | " + LINE[26:],
         "[2025-08-11 17:20:03] " + LINE[26:], TS + 0.25),
        ("worker-3 INFO: " + LINE[26:], LINE[26:], None),  # a level, no time
        ("worker-3: " + LINE[26:], "worker-3: " + LINE[26:], None),  # neither: no log layout
    ],
)  # fmt: skip
def test_an_unknown_prefix_before_sglangs_own_message_is_taken_off_with_its_time(wrapped, text, ts):
    assert LINE[26:].startswith("KV cache pool is full")
    assert unwrap(wrapped)[:2] == (text, ts)


@pytest.mark.parametrize(
    "line",
    [
        "user prompt: " + "x" * 200 + " Decode batch please",  # too far in
        "Exception: Capture cuda graph failed: invalid argument",  # an exception quoting it
        "ValueError: leak detected! self.max_total_num_tokens=3185200",
        "2025-08-11 17:20:03 RuntimeError: Decode batch failed",
    ],
)
def test_a_line_that_only_mentions_sglangs_words_is_left_as_it_is(line):
    assert unwrap(line).text == line


def test_every_batch_and_retraction_message_of_every_release_ends_where_a_cut_one_is_joined():
    # a cut line is joined only where the joined line holds `_COMPLETE`'s field: every message
    # of SGLang's that opens as a batch or retraction line holds one (0.1.3 - 0.5.23)
    from sglang_tuner.sources.log.messages.catalogue import catalogue
    from sglang_tuner.sources.log.prefix import _COMPLETE, _CUT_OPENERS

    opened = [m.text for m in catalogue().messages if m.text.startswith(_CUT_OPENERS)]
    assert len(opened) >= 30
    for text in opened:
        assert _COMPLETE.search(text.replace("{*}", "1")), text


def test_a_traceback_behind_pytorchs_rank_tag_reads_as_the_plain_one() -> None:
    """torch 2.2+ tags each line a distributed rank writes to stderr `[rank0]: ` (its C++
    warnings too, `[rank0]:[W1107 ...]`): taken off, the traceback names its exception."""
    traceback = [
        "Traceback (most recent call last):",
        '  File "/sgl/srt/managers/scheduler.py", line 2100, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    ]
    plain = [LINE, *traceback]
    tagged = [LINE, *(f"[rank0]: {line}" for line in traceback)]
    assert [text for text, _, _ in unwrap_lines(tagged)] == plain
    (crash,) = scan_lines([text for text, _, _ in unwrap_lines(tagged)]).crashes
    assert (crash.kind, crash.message) == ("driver", traceback[3])
    warning = "[rank0]:[W1107 10:00:00.000000 ProcessGroupNCCL.cpp:1168] Warning: destroy"
    assert list(pasted_lines([warning])) == [warning.removeprefix("[rank0]:")]
