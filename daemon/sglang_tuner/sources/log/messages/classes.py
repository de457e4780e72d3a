"""What an SGLang message means for tuning: its class, as rules over its text and where it is
printed (keyword tables, first match wins), never one entry per message.

Classes:
- `crash`: the server dies of a tuning problem; `kind` is a crash kind of `sources/log/crash.py`
  and `phase` where it happens (load, pool_sizing, capture, prefill, decode; "" when the log
  must tell).
- `config_error`: the server refuses its flags; `flag` is the one the message names ("" when
  it names none that exists).
- `not_tuning`: no flag fixes it; `kind` is allocator_bug (allocator or accounting bug),
  toolchain (toolchain or architecture), driver (driver, NCCL, network), model (model or
  quantization incompatibility), request (a client's request is refused), killed (the host or
  a supervisor ended the process: the kernel's OOM killer, a container limit, a signal), native
  (a crash below Python: a segmentation fault, an abort) or software (a Python programming error
  no release catalogues: a bug, or a combination the code does not handle).
- `signal`: a line the tuner reads as a signal; `kind` says of what (load, retraction, memory,
  startup, capture, progress, notice).
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

CRASH, CONFIG, NOT_TUNING, SIGNAL = "crash", "config_error", "not_tuning", "signal"
CLASSES = (CRASH, CONFIG, NOT_TUNING, SIGNAL)
PHASES = ("load", "pool_sizing", "capture", "prefill", "decode", "")
NOT_TUNING_KINDS = (
    "allocator_bug",
    "toolchain",
    "driver",
    "model",
    "request",
    "killed",
    "native",
    "software",
)
SIGNAL_KINDS = ("load", "retraction", "memory", "startup", "capture", "progress", "notice")
FAILURES = frozenset({"raise", "assert", "error"})  # call kinds that report a failure


@dataclass(frozen=True, slots=True)
class Verdict:
    """One message's class (see the module docstring) and what gave it (`rule`): the table row,
    or for a crash's exception line (`exceptions.diagnose`) the catalogue entry or the fallback
    family."""

    cls: str
    kind: str = ""
    phase: str = ""
    flag: str = ""
    rule: str = ""

    def as_data(self) -> dict[str, str]:
        """The data file's fields."""
        return {
            "class": self.cls,
            "kind": self.kind,
            "phase": self.phase,
            "flag": self.flag,
            "rule": self.rule,
        }


@dataclass(frozen=True, slots=True)
class KeywordRule:
    """A class for messages whose lower-cased text holds any of `words` (and, where given,
    printed by one of `calls` in one of `areas`)."""

    name: str
    cls: str
    kind: str
    words: tuple[str, ...]
    phase: str = ""
    calls: frozenset[str] = FAILURES | {"warning", "info"}
    areas: frozenset[str] | None = None


def _w(text: str) -> tuple[str, ...]:
    return tuple(word.strip() for word in text.split("|"))


def _holds(lowered: str, words: tuple[str, ...]) -> bool:
    """True when `lowered` holds a word starting at a word boundary (`port` is not found in
    `supports`; a word matches as a prefix: `quantiz` finds `quantization`). No words: any text."""
    if words == ("",):
        return True
    for word in words:
        at = lowered.find(word)
        while at >= 0:
            if at == 0 or not (lowered[at - 1].isalnum() or lowered[at - 1] == "_"):
                return True
            at = lowered.find(word, at + 1)
    return False


_ANY = FAILURES | {"warning", "info"}
_SAYS = frozenset({"info", "warning"})
# First match wins: the specific crashes SGLang names, then what no flag fixes, then flags,
# then the lines the tuner reads as signals.
KEYWORD_RULES: tuple[KeywordRule, ...] = (
    KeywordRule(  # Python's own wording, which SGLang's __getattr__ copies: any code prints it
        "python_wording",
        NOT_TUNING,
        "software",
        _w("object has no attribute"),
        calls=FAILURES,
    ),
    KeywordRule(
        "pool_exhausted",
        CRASH,
        "kv_pool_exhausted",
        _w(
            "try to lower your batch size|alloc_req_slots runs out of memory|"
            "no space left for only one request|"
            "please set a smaller number for `--max-running-requests`"
        ),
        calls=FAILURES,
    ),
    KeywordRule(
        "not_enough_memory",
        CRASH,
        "startup_not_enough_memory",
        _w(
            "not enough memory|not enough gpu memory|no room for the full kv pool|"
            "no gpu memory for the kv cache|increase --mem-fraction-static|"
            "is too small to serve any requests|memory is not enough|"
            "max_running_request is zero|memory pool size is too small"
        ),
        phase="pool_sizing",
        calls=FAILURES,
    ),
    KeywordRule(
        "leak",
        NOT_TUNING,
        "allocator_bug",
        _w("leak|double free|should never happen|this should not happen"),
        calls=FAILURES,
    ),
    KeywordRule(
        "leak_or_invariant",
        NOT_TUNING,
        "allocator_bug",
        _w(
            "available_size|free_slots|"
            "token_to_kv_pool|req_to_token_pool|is not freed|evictable_size|protected_size|"
            "refcount|ref_count|lock_ref|inconsistent|mismatch|invariant|sanity check|"
            "out of range|overlap|already in|not in"
        ),
        calls=FAILURES,
        areas=frozenset({"memory", "scheduler"}),
    ),
    KeywordRule(
        "capture_oom",
        CRASH,
        "cuda_graph_capture_oom",
        _w("out of memory|outofmemoryerror"),
        phase="capture",
        calls=FAILURES,
        areas=frozenset({"cuda_graph"}),
    ),
    KeywordRule(
        "capture_failed",
        CRASH,
        "capture_failure",
        _w("graph failed|capture failed|failed to capture|graph capture"),
        phase="capture",
        calls=FAILURES,
        areas=frozenset({"cuda_graph", "model_runner"}),
    ),
    KeywordRule(
        "prefill_oom",
        CRASH,
        "prefill_oom",
        _w("prefill out of memory|extend out of memory"),
        phase="prefill",
        calls=FAILURES,
    ),
    KeywordRule(
        "decode_oom",
        CRASH,
        "decode_oom",
        _w("decode out of memory"),
        phase="decode",
        calls=FAILURES,
    ),
    KeywordRule(
        "pool_assertion",
        NOT_TUNING,
        "allocator_bug",
        _w(""),
        calls=frozenset({"assert"}),
        areas=frozenset({"memory"}),
    ),
    KeywordRule(
        "server_args_check",
        CONFIG,
        "",
        _w(""),
        calls=FAILURES,
        areas=frozenset({"server_args"}),
    ),
    KeywordRule(
        "driver_network",
        NOT_TUNING,
        "driver",
        _w(
            "nccl|gloo|watchdog|timed out|timeout|connection refused|connection reset|"
            "socket|zmq|address already in use|rdma|infiniband|ibverbs|mooncake|nixl|"
            "heartbeat|health check|cuda error|driver|peer access|p2p|process group|"
            "all_reduce|allreduce|sigquit|child process|shared memory|/dev/shm|network|"
            "unreachable|broken pipe|cudaerror|cuda_error|illegal memory access|"
            "device-side assert|uncorrectable|ecc|occupied by other processes|unbalanced"
        ),
        calls=FAILURES,
    ),
    KeywordRule(
        "toolchain",
        NOT_TUNING,
        "toolchain",
        _w(
            "sm_|sm80|sm86|sm89|sm90|sm100|sm103|sm120|sm12x|compute capability|ptxas|"
            "triton|sgl_kernel|sgl-kernel|deep_gemm|deepgemm|cutlass|cudnn|nvcc|jit|"
            "compile|install|importerror|modulenotfounderror|not installed|cuda version|"
            "torch version|requires cuda|rocm|hip|npu|xpu|hpu|musa|hopper|blackwell|ampere|"
            "gpu architecture|unsupported device|platform|bindings|is not available"
        ),
        calls=FAILURES,
    ),
    KeywordRule("flag_named", CONFIG, "", _w("--"), calls=FAILURES),
    KeywordRule(
        "unsupported_combination",
        CONFIG,
        "",
        _w(
            "unknown|unsupported|not supported|invalid|must be|requires|is required|"
            "incompatible|not compatible|cannot be used|only supports|only supported|"
            "only compatible|please set|please use|expected one of|notimplementederror|"
            "not implemented|not yet supported|does not support|doesn't support|"
            "is disabled|enable_|disable_|server_args"
        ),
        calls=FAILURES,
    ),
    KeywordRule(
        "model_quantization",
        NOT_TUNING,
        "model",
        _w(
            "quantiz|fp8|fp4|int8|int4|awq|gptq|marlin|gguf|bitsandbytes|w8a8|mxfp|nvfp4|"
            "model|architecture|config.json|hf_config|checkpoint|safetensors|weight|"
            "dtype|head_dim|num_heads|kv_heads|layer|vocab|rope|moe|expert|lora|adapter|"
            "tokenizer|chat template|multimodal|vision|image|audio|video|embedding|"
            "draft|eagle|speculative|mamba|hybrid|swa|sliding window|mla|attention"
        ),
        calls=FAILURES,
    ),
    # Only where a request's failure is answered to its client and the server lives on: the
    # tokenizer's and the HTTP server's. The scheduler's raises and asserts end its process
    # ("Scheduler hit an exception"), whatever words about batches or tokens they hold: a
    # crash while serving (`AREA_DEFAULTS`), never "a request refused".
    KeywordRule(
        "request_refused",
        NOT_TUNING,
        "request",
        _w(
            "request|input|prompt|token|length|sampling|temperature|top_p|top_k|logprob|"
            "stop|regex|json|grammar|schema|rid|session|stream|max_new_tokens|"
            "context|abort|finish|parallel sampling|batch"
        ),
        calls=FAILURES,
        areas=frozenset({"tokenizer", "http"}),
    ),
    # -- lines read as signals --------------------------------------------------------------
    KeywordRule(
        "batch_line",
        SIGNAL,
        "load",
        _w(
            "decode batch|prefill batch|#running-req|#queue-req|token usage|gen throughput|"
            "fill batch|#running_req"  # 0.1.x: "new fill batch. ... #running_req: N"
        ),
        calls=_SAYS,
    ),
    KeywordRule("retraction", SIGNAL, "retraction", _w("retract"), calls=_SAYS),
    KeywordRule(
        "memory_line",
        SIGNAL,
        "memory",
        _w(
            "avail mem|mem usage|memory pool|kv cache is allocated|max_total_num_token|"
            "mem_fraction_static|memory|#tokens|k size|cache"
        ),
        calls=_SAYS,
    ),
    KeywordRule("capture_line", SIGNAL, "capture", _w("capture|cuda graph|graph"), calls=_SAYS),
    KeywordRule(
        "startup_line",
        SIGNAL,
        "startup",
        _w(
            "load weight|init torch distributed|server is fired up|uvicorn|warmup|"
            "the server is|started|init|loading|begin|end."
        ),
        calls=_SAYS,
    ),
)
# What a failure with no keyword above means, by where it is raised: an invariant of a pool is
# an allocator bug, a CUDA-graph runner's failure is a capture failure, the model runner's is a
# load failure, the server arguments' a refused flag, the tokenizer's and HTTP server's a
# refused request, the scheduler's a crash while serving.
AREA_DEFAULTS: dict[str, Verdict] = {
    "memory": Verdict(NOT_TUNING, "allocator_bug", rule="area:memory"),
    "cuda_graph": Verdict(CRASH, "capture_failure", "capture", rule="area:cuda_graph"),
    "model_runner": Verdict(CRASH, "load_failure", "load", rule="area:model_runner"),
    "server_args": Verdict(CONFIG, rule="area:server_args"),
    "tokenizer": Verdict(NOT_TUNING, "request", rule="area:tokenizer"),
    "http": Verdict(NOT_TUNING, "request", rule="area:http"),
    "scheduler": Verdict(CRASH, "serving_failure", rule="area:scheduler"),
}
# Lines that report no failure and hold no keyword above.
CALL_DEFAULTS: dict[str, Verdict] = {
    "info": Verdict(SIGNAL, "progress", rule="call:info"),
    "warning": Verdict(SIGNAL, "notice", rule="call:warning"),
}
_FLAG = re.compile(r"--([a-z][a-z0-9-]+)")


def classify(
    text: str,
    call: str,
    exception: str,
    area: str,
    refs: Iterable[str] = (),
    flags: Iterable[str] = (),
) -> Verdict:
    """The class of one message (`text`: its pattern; `flags`: every ServerArgs field)."""
    lowered = f"{exception}: {text}".lower()
    flag = _flag_named(text, refs, set(flags))
    for rule in KEYWORD_RULES:
        if call not in rule.calls or (rule.areas is not None and area not in rule.areas):
            continue
        if _holds(lowered, rule.words):
            named = flag if rule.cls == CONFIG else ""
            return Verdict(rule.cls, rule.kind, rule.phase, named, rule.name)
    if call in CALL_DEFAULTS:
        return CALL_DEFAULTS[call]
    verdict = AREA_DEFAULTS.get(area)
    if verdict is None:
        return Verdict("")
    if verdict.cls == CONFIG:
        return Verdict(CONFIG, flag=flag, rule=verdict.rule)
    return verdict


def _flag_named(text: str, refs: Iterable[str], fields: set[str]) -> str:
    """The flag a message names: a `--flag` in its text, else a ServerArgs field it prints."""
    if match := _FLAG.search(text):
        return f"--{match.group(1)}"
    named = sorted((f for f in fields if len(f) > 6 and f in text), key=lambda f: (-len(f), f))
    named += sorted(ref for ref in refs if ref in fields)
    return f"--{named[0].replace('_', '-')}" if named else ""
