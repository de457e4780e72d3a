"""Scheduler log lines in each SGLang version's exact format, written to an optional file."""

from __future__ import annotations

import time
from typing import Any, TextIO

from .catalogue import Version, parse_version


def prefix(at_epoch: float, dp: int | None, tp: int | None) -> str:
    """`[2025-09-11 10:26:01 DP0 TP0] ` as configure_logger prints it."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at_epoch))
    parts = (
        [stamp] + ([f"DP{dp}"] if dp is not None else []) + ([f"TP{tp}"] if tp is not None else [])
    )
    return "[" + " ".join(parts) + "] "


def decode_line(v: Version, g: dict[str, float], graph: bool) -> str:
    """The `Decode batch` line (every --decode-log-interval steps)."""
    head = "Decode batch. " if v < (0, 5, 4) else "Decode batch, "
    body = (
        f"#running-req: {int(g['num_running_reqs'])}, #token: {int(g['num_used_tokens'])}, "
        f"token usage: {g['token_usage']:.2f}, cuda graph: {graph}, "
        f"gen throughput (token/s): {g['gen_throughput']:.2f}, "
        f"#queue-req: {int(g['num_queue_reqs'])}"
    )
    return head + body + (", " if v < (0, 5, 9) else "")


def prefill_line(
    v: Version, g: dict[str, float], seqs: int, tokens: int, cached: int, throughput: float
) -> str:
    """The `Prefill batch` line (every prefill batch)."""
    head = "Prefill batch. " if v < (0, 5, 4) else "Prefill batch, "
    body = (
        f"#new-seq: {seqs}, #new-token: {tokens}, #cached-token: {cached}, "
        f"token usage: {g['token_usage']:.2f}, #running-req: {int(g['num_running_reqs'])}, "
        f"#queue-req: {int(g['num_queue_reqs'])}, "
    )
    if v < (0, 5, 9):
        return head + body
    if v < (0, 5, 10):
        return head + body + f"input throughput (token/s): {throughput:.2f}, cuda graph: False"
    pending = f"#pending-token: {0}, " if v >= (0, 5, 12) else ""
    return (
        head + body + pending + f"cuda graph: False, input throughput (token/s): {throughput:.2f}"
    )


def retract_line(v: Version, count: int, gained: int, old: float, new: float) -> str:
    """The retraction warning."""
    gain = f"#new_tokens_gained: {gained}, " if v >= (0, 5, 7) else ""
    return (
        f"KV cache pool is full. Retract requests. #retracted_reqs: {count}, {gain}"
        f"#new_token_ratio: {old:.4f} -> {new:.4f}"
    )


def startup_lines(model: Any) -> list[str]:
    """The summary line the guide reads `available_gpu_mem` from, and the ready line."""
    plan, knobs = model.plan, model.config.knobs
    return [
        f"KV Cache is allocated. #tokens: {plan.max_total_num_tokens}, "
        f"K size: {plan.kv_cache_gb / 2:.2f} GB, V size: {plan.kv_cache_gb / 2:.2f} GB",
        f"max_total_num_tokens={plan.max_total_num_tokens}, "
        f"chunked_prefill_size={knobs.chunked_prefill_size}, "
        f"max_prefill_tokens={knobs.max_prefill_tokens}, "
        f"max_running_requests={plan.max_running_requests}, "
        f"context_len={model.config.llm.context_len}, "
        f"available_gpu_mem={plan.available_gb:.2f} GB",
    ]


def oom_lines(tokens: int, need_gb: float, free_gb: float) -> list[str]:
    """A forward-pass OOM as the scheduler's exception handler prints it."""
    return [
        "Scheduler hit an exception: Traceback (most recent call last):",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {need_gb:.2f} GiB. "
        f"GPU 0 has a total capacity of 79.19 GiB of which {free_gb * 1024:.2f} MiB is free. "
        f"(prefill batch of {tokens} tokens)",
    ]


class LogWriter:
    """A LogSink writing one simulated server's log file; `epoch` maps simulated t=0 to a date."""

    def __init__(self, path: str, version: str, epoch: float, tp: int = 1, dp: int = 1) -> None:
        self.file: TextIO = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self.version = parse_version(version)
        self.epoch, self.tp, self.dp = epoch, tp, dp
        self.last_prefill: dict[int, float] = {}

    def _write(self, at: float, lines: list[str], rank: int | None = 0) -> None:
        dp = rank if self.dp > 1 and rank is not None else None
        tp = 0 if self.tp > 1 and rank is not None else None
        head = prefix(self.epoch + at, dp, tp)
        self.file.write("".join(head + line + "\n" for line in lines))

    def emit(self, at: float, event: str, **fields: Any) -> None:
        """Render one scheduler event."""
        rank: Any = fields.get("rank")
        index = getattr(rank, "index", 0)
        if event == "decode":
            self._write(at, [decode_line(self.version, rank.gauges, rank.last_graph)], index)
        elif event == "prefill":
            since = at - self.last_prefill.get(index, at - 1.0)
            self.last_prefill[index] = at
            throughput = fields["tokens"] / max(since, 1e-3)
            self._write(
                at,
                [
                    prefill_line(
                        self.version,
                        rank.gauges,
                        fields["seqs"],
                        fields["tokens"],
                        fields["cached"],
                        throughput,
                    )
                ],
                index,
            )
        elif event == "retract":
            line = retract_line(
                self.version, fields["count"], fields["gained"], fields["old"], fields["new"]
            )
            self._write(at, [line])
        elif event == "startup":
            self._write(at, startup_lines(fields["model"]))
            self._write(at, ["The server is fired up and ready to roll!"], None)
        elif event == "oom":
            self._write(at, oom_lines(fields["tokens"], fields["need_gb"], fields["free_gb"]))

    def close(self) -> None:
        """Close the file."""
        self.file.close()
