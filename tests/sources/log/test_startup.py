"""SGLang's startup and memory lines read as numbers (every spelling 0.4-0.5), the pool's size
held against the budget SGLang sizes it by, and what a log of startup lines alone says."""

from pathlib import Path

from sglang_tuner.sources.log.lines import scan_lines
from sglang_tuner.sources.log.startup import StartupMemory

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs" / "corpus"
P = "[2025-06-01 10:00:00 TP0] "
BEGIN = P + "Load weight begin. avail mem=78.50 GB"
END_04 = P + "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.40 GB"
END = END_04 + ", mem usage=15.10 GB."
END_510 = P + "Load weight end. elapsed=12.3 s, type=Qwen3ForCausalLM, quant=fp8, fmt=e4m3, "
END_510 += "avail mem=63.40 GB, mem usage=15.10 GB."
KV = P + "KV Cache is allocated. #tokens: 400000, K size: 24.00 GB, V size: 24.00 GB"
DRAFT = P + "KV Cache is allocated. #tokens: 400000, K size: 0.50 GB, V size: 0.50 GB"
MLA = P + "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 900000, KV size: 40.5 GB"
POOL_END = P + "Memory pool end. avail mem=15.20 GB"


def read(*lines: str) -> StartupMemory:
    memory = StartupMemory()
    for line in lines:
        memory.read(line)
    return memory


def test_every_spelling_of_the_startup_lines_is_read() -> None:
    facts = read(BEGIN, END, KV, POOL_END).facts()
    assert facts == {
        "before_load_gb": 78.5,
        "after_load_gb": 63.4,
        "weights_gb": 15.1,
        "kv_tokens": 400000.0,
        "kv_pool_gb": 48.0,
        "after_pool_gb": 15.2,
    }
    assert read(BEGIN, END_510).weights_gb == 15.1
    assert read(BEGIN, END_04).weights_gb == 15.1  # 0.4.0-0.4.3: what the load took
    assert read(MLA).facts() == {"kv_tokens": 900000.0, "kv_pool_gb": 40.5}
    assert read("KV Cache is allocated. K size: 2.00 GB, V size: 2.00 GB.").kv_pool_gb == 4.0


def test_the_draft_models_pool_does_not_replace_the_targets() -> None:
    assert read(BEGIN, END, KV, DRAFT).kv_pool_gb == 48.0


def test_a_new_process_starts_its_numbers_again() -> None:
    memory = read(BEGIN, END, KV, BEGIN)
    assert memory.facts() == {"before_load_gb": 78.5}


def test_a_pool_within_its_budget_agrees() -> None:
    # 63.4 - 78.5 x (1 - 0.9) = 55.55 GB budget; a 48 GB pool (graphs, rounding) is no bug
    assert read(BEGIN, END, KV).sizing(0.9) is None
    assert read(BEGIN, END, KV).budget_gb(0.9) == 63.4 - 78.5 * (1 - 0.9)


def test_a_pool_larger_than_its_budget_is_an_accounting_bug() -> None:
    said = read(BEGIN, END, KV).sizing(0.7)  # budget 63.4 - 23.55 = 39.85 GB < 48 GB
    assert said is not None and said.endswith("an accounting bug")
    assert "mem_fraction_static 0.7" in said and "weights 15.10 GB" in said


def test_a_pool_far_below_its_budget_is_a_sizing_bug_unless_capped() -> None:
    small = P + "KV Cache is allocated. #tokens: 40000, K size: 2.00 GB, V size: 2.00 GB"
    said = read(BEGIN, END, small).sizing(0.9)
    assert said is not None and said.endswith("a sizing bug")
    assert read(BEGIN, END, small).sizing(0.9, capped=True) is None
    assert read(KV).sizing(0.9) is None  # no weights line: nothing to hold it against


def test_a_log_of_startup_lines_alone_gives_the_pool_and_its_memory() -> None:
    counts = scan_lines([BEGIN, END, KV, POOL_END])
    assert counts.max_total_num_tokens == 400000
    assert counts.startup_memory["kv_pool_gb"] == 48.0
    summary = P + "max_total_num_tokens=398000, chunked_prefill_size=8192, max_prefill_tokens=16384"
    summary += ", max_running_requests=2048, context_len=32768, available_gpu_mem=10.1 GB"
    counts = scan_lines([BEGIN, END, KV, POOL_END, summary])
    assert counts.max_total_num_tokens == 398000  # the summary's word is the last
    assert counts.server_args is not None  # the scheduler's own cap: one rank's, not the flag
    assert counts.server_args["effective_max_running_requests_per_dp"] == 2048


def test_sglangs_own_current_value_is_the_fraction_the_server_ran_with() -> None:
    line = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    counts = scan_lines([line + "Current value: mem_fraction_static=0.83"])
    assert counts.server_args is not None and counts.server_args["mem_fraction_static"] == 0.83
    older = line + "Current value: self.server_args.mem_fraction_static=0.88"  # 0.5.3-0.5.9
    counts = scan_lines([older])
    assert counts.server_args is not None and counts.server_args["mem_fraction_static"] == 0.88


def test_the_corpus_startup_logs_are_read() -> None:
    gemma = (CORPUS / "gemma3-consumer-gpu-mem-frac-065-boundary.log").read_text().splitlines()
    counts = scan_lines(gemma)
    assert counts.max_total_num_tokens == 46045
    assert counts.startup_memory["after_pool_gb"] == 0.07
    rocm = (CORPUS / "rocm-dsr1-bf16-dp8-negative-profiled-tokens.log").read_text().splitlines()
    assert scan_lines(rocm).startup_memory["weights_gb"] == 166.59
