"""The launch line and startup summary read as the server's flags (a real launch line's shape)."""

from sglang_tuner.sources.log.server_args import has_server_args, parse_server_args, summary_values
from sglang_tuner.sources.server_info import parse_server_info

# The shape SGLang prints (engine.py: `server_args=ServerArgs(...)`, a dataclass repr).
LAUNCH = (
    "[2026-03-21 03:31:56] INFO engine.py:177: server_args=ServerArgs(model_path='deepseek-ai/"
    "DeepSeek-R1-Distill-Qwen-7B', tokenizer_mode='auto', trust_remote_code=False, "
    "context_length=None, tp_size=2, dp_size=1, mem_fraction_static=0.88, "
    "schedule_conservativeness=0.7, schedule_policy='fcfs', cuda_graph_max_bs=160, "
    "api_key='s3cret', json_model_override_args='{}', lora_paths=[], "
    "speculative_algorithm=None, enable_torch_compile=True)"
)


def test_parse_server_args_reads_every_literal_of_the_launch_line():
    assert has_server_args(LAUNCH)
    args = parse_server_args(LAUNCH)
    assert args["tp_size"] == 2 and args["mem_fraction_static"] == 0.88
    assert args["schedule_policy"] == "fcfs" and args["lora_paths"] == []
    assert args["enable_torch_compile"] is True and args["speculative_algorithm"] is None


def test_parse_server_args_skips_what_is_not_a_literal_and_survives_a_cut_line():
    odd = LAUNCH.replace("lora_paths=[]", "lora_ref=LoRARef(name='x', path=<object at 0x7f>)")
    assert parse_server_args(odd)["tp_size"] == 2  # the repr no longer parses whole
    cut = LAUNCH[: LAUNCH.index("schedule_policy")]
    assert parse_server_args(cut)["mem_fraction_static"] == 0.88
    assert parse_server_args("[2026-01-01 00:00:00] Decode batch, #running-req: 1") == {}


def test_launch_line_and_summary_become_a_server_config_with_secrets_redacted():
    summary = (
        "max_total_num_tokens=500000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4096, context_len=131072, available_gpu_mem=7.00 GB"
    )
    config = parse_server_info({**parse_server_args(LAUNCH), **summary_values(summary)})
    assert config.schedule_conservativeness == 0.7 and config.tp_size == 2
    assert config.max_running_requests == 4096 and config.chunked_prefill_size == 8192
    assert config.context_length == 131072 and config.cuda_graph_max_bs == 160
    assert "s3cret" not in repr(config.raw)
