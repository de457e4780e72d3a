"""The ways a simulated server dies, and the log text each version prints for them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sglang_sim import Knobs, Load, ServerConfig, ServerModel
from sglang_sim.logs import LogWriter
from sglang_tuner.sources.log.lines import scan_lines

CRASH_KINDS = (
    "cuda_graph_capture_oom",
    "prefill_oom",
    "decode_oom",
    "kv_pool_exhausted",
    "startup_not_enough_memory",
    "other_crash",
)

NO_MEMORY = Knobs(mem_fraction_static=0.15)
CAPTURE = Knobs(mem_fraction_static=0.98, cuda_graph_max_bs=1536, max_running_requests=2048)
DECODE = Knobs(
    mem_fraction_static=0.975,
    cuda_graph_max_bs=8,
    chunked_prefill_size=2048,
    max_prefill_tokens=2048,
)
MANY_SHORT = Load(clients=2000, prompt_mean=200, max_new_tokens=512, eos_fraction=0.0)
NO_LOAD = Load()


def _run(tmp_path, knobs: Knobs, version: str, load: Load = NO_LOAD, seconds: float = 120.0):
    path = tmp_path / f"{version}.log"
    log = LogWriter(str(path), version, epoch=1_760_000_000.0)
    config = ServerConfig(knobs=knobs, load=load, version=version)
    model = ServerModel(config, seed=1, log=log)
    statuses = set()
    for t in range(0, int(seconds), 5):
        model.advance_to(float(t))
        statuses.add(model.status())
    log.close()
    return model, statuses, path.read_text()


@pytest.mark.parametrize(
    ("version", "suffix"),
    [
        ("0.4.10", "--mem-fraction-static.\n"),
        ("0.5.9", "Current value: self.server_args.mem_fraction_static=0.15\n"),
        ("0.5.23", "Current value: mem_fraction_static=0.15\n"),
    ],
)
def test_empty_pool_fails_startup_with_not_enough_memory(tmp_path, version, suffix):
    model, statuses, text = _run(tmp_path, NO_MEMORY, version)
    assert model.plan.failure == "no_memory" and model.plan.max_total_num_tokens == 0
    assert "up" not in statuses and model.restarts >= 2
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in text
    assert suffix in text
    assert "The server is fired up" not in text


@pytest.mark.parametrize(
    ("version", "hint"),
    [("0.5.9", "set --cuda-graph-max-bs to"), ("0.5.23", "set --cuda-graph-max-bs-decode to")],
)
def test_graph_capture_fails_when_max_bs_outgrows_free_memory(tmp_path, version, hint):
    model, statuses, text = _run(tmp_path, CAPTURE, version)
    assert model.plan.failure == "graph_capture"
    assert "up" not in statuses
    assert "Exception: Capture cuda graph failed: CUDA out of memory." in text
    assert hint in text
    fine, _, _ = _run(tmp_path, replace(CAPTURE, cuda_graph_max_bs=256), version)
    assert fine.plan.failure is None


@pytest.mark.parametrize(("version", "frame"), [("0.5.9", "forward_extend"), ("0.5.23", "_raw")])
def test_prefill_oom_logs_a_torch_oom_from_the_extend_forward(tmp_path, version, frame):
    knobs = Knobs(mem_fraction_static=0.965)
    model, statuses, text = _run(tmp_path, knobs, version, Load(clients=300, prompt_mean=3000))
    assert model.restarts >= 1 and "dead" in statuses
    assert "Scheduler hit an exception: Traceback (most recent call last):" in text
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in text
    assert frame in text
    assert "Received sigquit from a child process. It usually means the child failed." in text


def test_decode_oom_when_an_eager_batch_outgrows_free_memory(tmp_path):
    model, _, text = _run(tmp_path, DECODE, "0.5.9", MANY_SHORT, seconds=300)
    assert model.restarts >= 1
    assert "in forward_decode" in text
    assert "torch.OutOfMemoryError: CUDA out of memory." in text


def test_crashed_server_restarts_with_fresh_counters():
    config = ServerConfig(knobs=Knobs(mem_fraction_static=0.965), load=Load(clients=300))
    model = ServerModel(config, seed=1)
    while model.restarts == 0:
        model.advance_to(model.now + 5)
    boots = model.boots
    model.advance_to(model.down_until + 0.1)
    assert model.boots == boots + 1 or model.restarts > 1


@pytest.mark.parametrize("version", ["0.4.10", "0.5.9", "0.5.17", "0.5.23"])
@pytest.mark.parametrize(
    ("knobs", "load", "seconds", "kind"),
    [
        (NO_MEMORY, NO_LOAD, 120.0, "startup_not_enough_memory"),
        (CAPTURE, NO_LOAD, 120.0, "cuda_graph_capture_oom"),
        (
            Knobs(mem_fraction_static=0.965),
            Load(clients=300, prompt_mean=3000),
            120.0,
            "prefill_oom",
        ),
        (DECODE, MANY_SHORT, 300.0, "decode_oom"),
    ],  # fmt: skip
    ids=["not_enough_memory", "capture", "prefill", "decode"],
)
def test_the_daemon_reads_each_simulated_crash_as_its_kind(
    tmp_path, version, knobs, load, seconds, kind
):
    model, _, text = _run(tmp_path, knobs, version, load, seconds)
    if model.restarts == 0 and model.plan.failure is None:
        pytest.skip(f"this crash does not happen in {version}'s model")
    counts = scan_lines(text.splitlines())
    kinds = {k: getattr(counts, k) for k in CRASH_KINDS if getattr(counts, k)}
    assert set(kinds) == {kind}, text[-3000:]


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_a_prefill_oom_follows_the_prefill_batch_line_it_crashed_in(tmp_path, version):
    # SGLang logs a prefill batch before running its forward: from 0.5.17 the traceback names
    # only _forward_raw, so that line is what tells a reader the phase.
    knobs = Knobs(mem_fraction_static=0.965)
    _, _, text = _run(tmp_path, knobs, version, Load(clients=300, prompt_mean=3000), 600.0)
    lines = text.splitlines()
    crashes = [i for i, line in enumerate(lines) if "Scheduler hit an exception" in line]
    assert crashes
    assert all("Prefill batch" in lines[i - 1] for i in crashes)
