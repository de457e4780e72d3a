"""Scheduler log lines in each SGLang version's exact format, written to an optional file."""

from __future__ import annotations

import time
from typing import Any, TextIO

from sglang_physics.memory import CUDA_CONTEXT_GIB

from . import crashlog
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
    """Startup up to the failure, if any: weights, KV pool, CUDA graphs, the summary line."""
    plan, knobs, v = model.plan, model.knobs, model.version
    total = model.config.gpu.memory_gib - CUDA_CONTEXT_GIB
    after_pool = total - plan.weight_gb - plan.kv_cache_gb
    lines = [
        f"Load weight end. type={model.config.llm.architecture}, dtype=torch.bfloat16, "
        f"avail mem={total - plan.weight_gb:.2f} GB, mem usage={plan.weight_gb:.2f} GB."
    ]
    if plan.failure == "no_memory":
        return lines
    lines += [
        f"KV Cache is allocated. #tokens: {plan.max_total_num_tokens}, "
        f"K size: {plan.kv_cache_gb / 2:.2f} GB, V size: {plan.kv_cache_gb / 2:.2f} GB",
        f"Memory pool end. avail mem={after_pool:.2f} GB",
    ]
    if plan.capture_bs:
        lines.append(_capture_begin(v, after_pool))
    if plan.failure:
        return lines
    if plan.capture_bs:
        lines.append(_capture_end(v, plan.graph_gb, plan.available_gb, plan.capture_bs))
    return lines + [
        f"max_total_num_tokens={plan.max_total_num_tokens}, "
        f"chunked_prefill_size={knobs.chunked_prefill_size}, "
        f"max_prefill_tokens={knobs.max_prefill_tokens}, "
        f"max_running_requests={plan.max_running_requests}, "
        f"context_len={model.config.llm.context_len}, "
        f"available_gpu_mem={plan.available_gb:.2f} GB",
    ]


def _capture_begin(v: Version, avail: float) -> str:
    if v < (0, 5, 14):  # ModelRunner.init_device_graphs
        return (
            "Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={avail:.2f} GB"
        )
    return (  # model_runner_components/cuda_graph_setup.py
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
        f"avail mem={avail:.2f} GB"
    )


def _capture_end(v: Version, used: float, avail: float, sizes: tuple[int, ...]) -> str:
    if v < (0, 5, 14):
        return (
            "Capture cuda graph end. Time elapsed: 9.81 s. "
            f"mem usage={used:.2f} GB. avail mem={avail:.2f} GB."
        )
    return (
        f"Capture target decode CUDA graph end. bs={list(sizes)}, elapsed=9.81 s, "
        f"mem usage={used:.2f} GB, avail mem={avail:.2f} GB."
    )


def crash_text(model: Any, kind: str, fields: dict[str, Any]) -> str:
    """The exception a crash of this kind logs, in the version's wording."""
    v, plan, total = model.version, model.plan, model.config.gpu.memory_gib
    if kind == "no_memory":
        return crashlog.not_enough_memory(v, model.knobs.mem_fraction_static)
    free = plan.available_gb + plan.graph_gb
    if kind == "graph_capture":
        return crashlog.capture_failed(v, plan.graph_gb, free, total)
    phase = "decode" if kind == "decode_oom" else "prefill"
    return crashlog.forward_oom(v, phase, fields["need_gb"], plan.available_gb, total)


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
            self._prefill(at, rank, index, fields)
        elif event == "retract":
            line = retract_line(
                self.version, fields["count"], fields["gained"], fields["old"], fields["new"]
            )
            self._write(at, [line])
        elif event == "startup":
            model = fields["model"]
            self._write(at, startup_lines(model))
            if not model.plan.failure:
                self._write(at, ["The server is fired up and ready to roll!"], None)
        elif event == "crash":
            self._write(at, [crash_text(fields["model"], fields["kind"], fields)])
            self._write(at, [crashlog.SIGQUIT_LINE], None)

    def _prefill(self, at: float, rank: Any, index: int, fields: dict[str, Any]) -> None:
        since = at - self.last_prefill.get(index, at - 1.0)
        self.last_prefill[index] = at
        throughput = fields["tokens"] / max(since, 1e-3)
        line = prefill_line(
            self.version,
            rank.gauges,
            fields["seqs"],
            fields["tokens"],
            fields["cached"],
            throughput,
        )
        self._write(at, [line], index)

    def close(self) -> None:
        """Close the file."""
        self.file.close()
