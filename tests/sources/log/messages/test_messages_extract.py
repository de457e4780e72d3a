"""The generator's reading of SGLang's source (with `ast`): which modules, what each message's
pattern is, which versions print it. Sources are written here; nothing is downloaded."""

from sglang_tuner.sources.log.messages.extract import (
    _reading_order,
    _spans,
    area_of,
    module_messages,
    pattern_text,
    server_arg_fields,
)
from sglang_tuner.sources.log.messages.patterns import WILD, Pattern

SOURCE = """
import logging
logger = logging.getLogger(__name__)

def init_memory_pool(self, total_gpu_memory):
    if self.max_total_num_tokens <= 0:
        raise RuntimeError(
            "Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: {self.server_args.mem_fraction_static=}"
        )
    logger.info("KV Cache is allocated. #tokens: %d, K size: %.2f GB", n, k)
    assert self.page_size > 0, f"page_size={self.page_size} must be positive"

def log_decode_stats(self):
    msg = f"Decode batch. #running-req: {num_running_reqs}, "
    msg += f"#token: {num_used}, token usage: {usage:.2f}, "
    logger.info(msg)

    def nested():
        raise ValueError("Capture cuda graph failed: {}\\nPossible solutions: lower it".format(e))
    logger.warning("short")
"""


def _found() -> dict[str, tuple[str, str]]:
    messages = module_messages(SOURCE, "srt/model_executor/model_runner.py", "model_runner")
    return {m.pattern: (m.call, m.exception) for m in messages}


def test_holes_become_wildcards_and_each_kind_of_message_is_read() -> None:
    found = _found()
    # f"{x=}" prints the expression's text: SGLang's "Current value: self.server_args.…=0.88"
    assert found[
        "Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: self.server_args.mem_fraction_static={*}"
    ] == ("raise", "RuntimeError")
    assert found["KV Cache is allocated. #tokens: {*}, K size: {*} GB"] == ("info", "")
    assert found["page_size={*} must be positive"] == ("assert", "AssertionError")


def test_a_message_built_in_a_variable_is_followed_through_its_additions() -> None:
    patterns = _found()
    assert "Decode batch. #running-req: {*}, #token: {*}, token usage: {*}," in patterns


def test_nested_functions_and_every_line_of_a_multi_line_message_are_read() -> None:
    assert _found()["Capture cuda graph failed: {*}"] == ("raise", "ValueError")
    later = {
        m.pattern: m.continues
        for m in module_messages(SOURCE, "srt/model_executor/model_runner.py", "model_runner")
    }
    # the later line is a message of its own, carrying its first line (classed as it is)
    assert later["Possible solutions: lower it"] == "Capture cuda graph failed: {*}"
    assert later["Capture cuda graph failed: {*}"] == ""


def test_a_later_line_without_letters_is_no_message() -> None:
    source = "def f():\n    raise RuntimeError(f\"Pool ran out: {n}\\n{'-' * 80}\\n----------\")\n"
    found = [m.pattern for m in module_messages(source, "srt/managers/scheduler.py", "scheduler")]
    assert found == ["Pool ran out: {*}"]


def test_messages_without_enough_literal_text_are_left_out() -> None:
    assert not any(p.startswith("short") for p in _found())
    assert pattern_text([WILD, ": ", WILD]) == ""


def test_only_the_server_modules_are_read() -> None:
    assert area_of("sglang/srt/managers/scheduler.py") == "scheduler"
    assert area_of("sglang/srt/model_executor/cuda_graph_runner.py") == "cuda_graph"
    assert area_of("sglang/srt/mem_cache/allocator/paged.py") == "memory"
    assert area_of("sglang/srt/server_args.py") == "server_args"
    assert area_of("sglang/srt/entrypoints/http_server.py") == "http"
    assert area_of("sglang/srt/mem_cache/storage/mooncake_store/x.py") is None
    assert area_of("sglang/test/test_utils.py") is None
    assert area_of("sglang/srt/layers/linear.py") is None


def test_the_server_modules_of_releases_before_0_2_7_are_read_by_their_old_names() -> None:
    assert area_of("sglang/srt/managers/router/model_rpc.py") == "model_runner"  # 0.1.3-0.1.16
    assert area_of("sglang/srt/managers/controller/tp_worker.py") == "model_runner"  # -0.2.6
    assert area_of("sglang/srt/managers/controller/cuda_graph_runner.py") == "cuda_graph"
    assert area_of("sglang/srt/managers/controller/manager_single.py") == "scheduler"
    assert area_of("sglang/srt/managers/policy_scheduler.py") == "scheduler"  # 0.2.7-0.3.x
    assert area_of("sglang/srt/memory_pool.py") == "memory"
    assert area_of("sglang/srt/managers/data_parallel_controller.py") is None  # 0.4's: not read


def test_releases_from_0_4_0_are_read_first_so_they_name_a_messages_module() -> None:
    read = _reading_order(["0.1.3", "0.3.6.post3", "0.4.0", "0.4.0.post1", "0.5.23"])
    assert read == ["0.4.0", "0.4.0.post1", "0.5.23", "0.1.3", "0.3.6.post3"]


def test_versions_are_kept_as_runs_of_consecutive_releases() -> None:
    order = ["0.4.0", "0.4.0.post1", "0.4.1", "0.5.0", "0.5.1"]
    assert _spans(["0.4.0", "0.4.0.post1", "0.4.1", "0.5.1"], order) == "0.4.0..0.4.1, 0.5.1"


def test_server_arg_fields_are_read_from_the_dataclass() -> None:
    source = "class ServerArgs:\n    model_path: str\n    mem_fraction_static: float = None\n"
    assert server_arg_fields(source, "srt/server_args.py") == {"model_path", "mem_fraction_static"}


def test_a_pattern_matches_its_pieces_in_order_only() -> None:
    pattern = Pattern.parse("Decode batch. #running-req: {*}, #token: {*}")
    assert pattern.matches("[x] Decode batch. #running-req: 3, #token: 40, token usage: 0.1")
    assert not pattern.matches("#token: 40 Decode batch. #running-req: 3")
    assert pattern.anchor == "Decode batch. #running-req:"
