"""The text SGLang logs when a server dies: memory failures at startup and OOM in a forward."""

from __future__ import annotations

from .catalogue import Version

SITE = "/usr/local/lib/python3.12/dist-packages/sglang/srt"
NEW_CAPTURE_MSG_SINCE: Version = (0, 5, 14)  # CUDA-graph refactor: --cuda-graph-max-bs-decode

# CUDA_GRAPH_CAPTURE_FAILED_MSG: model_executor/cuda_graph_runner.py (0.4.10, 0.5.9),
# model_executor/runner_backend_utils/__init__.py (0.5.17, 0.5.23).
_CAPTURE_HINTS_OLD = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)
_CAPTURE_HINTS_NEW = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


def torch_oom(need_gb: float, free_gb: float, total_gb: float) -> str:
    """torch.OutOfMemoryError's message (PyTorch >= 2.4 wording)."""
    return (
        f"CUDA out of memory. Tried to allocate {need_gb:.2f} GiB. GPU 0 has a total capacity "
        f"of {total_gb:.2f} GiB of which {max(free_gb, 0.0) * 1024:.2f} MiB is free. "
        "Of the allocated memory the process has reserved most for the KV cache pool."
    )


def _frames(version: Version, phase: str) -> list[str]:
    """Traceback frames from the scheduler's loop into the forward pass."""
    head = [
        "Traceback (most recent call last):",
        f'  File "{SITE}/managers/scheduler.py", line 2435, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        f'  File "{SITE}/managers/scheduler.py", line 767, in event_loop_overlap',
        "    batch_result = self.run_batch(batch)",
    ]
    runner = f'  File "{SITE}/model_executor/model_runner.py", line 1711, in'
    if version < (0, 5, 17):  # forward_decode / forward_extend exist until the runner refactor
        name = "forward_decode" if phase == "decode" else "forward_extend"
        return [*head, f"{runner} {name}", "    return self.model.forward("]
    return [*head, f"{runner} _forward_raw", "    ret = self.model.forward("]


def forward_oom(version: Version, phase: str, need_gb: float, free_gb: float, total: float) -> str:
    """A CUDA OOM in a prefill or decode forward, as the scheduler's exception handler logs it."""
    lines = _frames(version, phase)
    lines.append(f"torch.OutOfMemoryError: {torch_oom(need_gb, free_gb, total)}")
    return "Scheduler hit an exception: " + "\n".join(lines)


def not_enough_memory(version: Version, fraction: float) -> str:
    """The KV pool would be empty: ModelRunner.init_memory_pool / pool_configurator.py."""
    msg = "Not enough memory. Please try to increase --mem-fraction-static."
    if (0, 5, 9) <= version < (0, 5, 17):
        msg += f" Current value: self.server_args.mem_fraction_static={fraction}"
    elif version >= (0, 5, 17):
        msg += f" Current value: mem_fraction_static={fraction}"
    frame = f'  File "{SITE}/model_executor/model_runner.py", line 1150, in init_memory_pool'
    text = "\n".join(["Traceback (most recent call last):", frame, f"RuntimeError: {msg}"])
    return "Scheduler hit an exception: " + text


def capture_failed(version: Version, need_gb: float, free_gb: float, total: float) -> str:
    """CudaGraphRunner.__init__: a RuntimeError while capturing, re-raised with the hints."""
    hints = _CAPTURE_HINTS_NEW if version >= NEW_CAPTURE_MSG_SINCE else _CAPTURE_HINTS_OLD
    frame = f'  File "{SITE}/model_executor/cuda_graph_runner.py", line 363, in __init__'
    error = f"Exception: Capture cuda graph failed: {torch_oom(need_gb, free_gb, total)}\n{hints}"
    text = "\n".join(["Traceback (most recent call last):", frame, error])
    return "Scheduler hit an exception: " + text


SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
