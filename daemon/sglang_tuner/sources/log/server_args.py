"""The flags a server started with, read from its log: the `server_args=ServerArgs(...)` line
SGLang prints at launch (a dataclass repr, every version), and the startup summary's effective
values (`max_total_num_tokens=…, chunked_prefill_size=…, max_running_requests=…,
context_len=…`). Together they stand in for `/server_info` where only a log is at hand.
"""

import ast
import re
from typing import Any

_MARK = "server_args=ServerArgs("
# `/server_info`'s name for a rank's request cap (`internal_states[]`, 0.5.8+).
PER_RANK_RUNNING = "effective_max_running_requests_per_dp"
# A value of the repr's simple kinds, for a line cut short (the whole repr then does not parse).
_LOOSE = re.compile(
    r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:e-?\d+)?|True|False|None)"
)
_SUMMARY = re.compile(
    r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens|max_running_requests"
    r"|context_len)=(\d+)"
)


def has_server_args(line: str) -> bool:
    """True when the line is SGLang's launch line with every server argument."""
    return _MARK in line


def parse_server_args(line: str) -> dict[str, Any]:
    """The server arguments of a launch line as plain values ({} when it holds none); a value
    that is not a literal (an object's repr) is left out."""
    at = line.find(_MARK)
    if at < 0:
        return {}
    text = line[at + len("server_args=") :].strip()
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        return _loose(text)
    if not isinstance(call, ast.Call):
        return {}
    args: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        try:
            args[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    return args


def _loose(text: str) -> dict[str, Any]:
    """The simple `key=value` pairs of a repr that does not parse whole."""
    args = {}
    for key, value in _LOOSE.findall(text):
        try:
            args[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            continue
    return args


def summary_values(line: str) -> dict[str, int]:
    """The startup summary's effective values, named as `/server_info` names them: its
    `max_running_requests` is the scheduler's own (per DP rank: the flag split over the
    attention-DP ranks, `model/flag_transforms.py`), not the flag, so it is the per-rank figure."""
    values = {key: int(value) for key, value in _SUMMARY.findall(line)}
    if "context_len" in values:
        values["context_length"] = values.pop("context_len")
    if "max_running_requests" in values:
        values[PER_RANK_RUNNING] = values.pop("max_running_requests")
    return values
