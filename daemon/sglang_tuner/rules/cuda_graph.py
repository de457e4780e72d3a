"""Guide sections "Tune CUDA Graph Coverage" and "Additional Optimizations / Torch Compile"."""

from collections.abc import Callable
from dataclasses import dataclass

from ..signals import (
    CUDA_GRAPH_FALSE_RATIO,
    CUDA_GRAPH_PASS_RATIO,
    NUM_RUNNING_REQS,
    NUM_RUNNING_REQS_MAX_RANK,
)
from ..values import Action, Finding, NoData, Outcome, Pass, Severity
from ..window import Row, frequently
from .base import (
    Rule,
    RuleInput,
    confidence_for,
    flag_action,
    format_duration,
    idle,
    judged,
    with_note,
)
from .hardware import model_params_billion
from .oom import per_rank_batch
from .versions import version_at_least

GRAPH_SOURCE = "Hyperparameter Tuning / Tune CUDA Graph Coverage"
COMPILE_SOURCE = "Hyperparameter Tuning / Additional Optimizations / Torch Compile"
MEM_FLAG = "--mem-fraction-static"
_NO_GRAPH_DATA = (
    "CUDA-graph coverage is unknown: needs cuda_graph_passes_total (SGLang >= 0.5.7), "
    "the log's Decode batch lines (set log_file), or cuda_graph_max_bs in /server_info"
)


@dataclass(frozen=True, slots=True)
class Coverage:
    """The first CUDA-graph coverage check that held frequently."""

    what: str
    ratio: float
    samples: int


def graph_flag(version: str | None) -> str:
    """`--cuda-graph-max-bs` was renamed `--cuda-graph-max-bs-decode` in SGLang 0.5.14."""
    renamed = version_at_least(version, (0, 5, 14))
    return "--cuda-graph-max-bs-decode" if renamed else "--cuda-graph-max-bs"


def batch_signal(inp: RuleInput) -> str:
    """Per-rank running batch: the busiest rank's series, else the total (one rank)."""
    return (
        NUM_RUNNING_REQS_MAX_RANK
        if inp.view.present(NUM_RUNNING_REQS_MAX_RANK)
        else NUM_RUNNING_REQS
    )


def _checks(inp: RuleInput) -> list[tuple[str, str, Callable[[Row], bool]]]:
    """(description, signal, per-sample predicate) of each coverage check with its data."""
    low = inp.thresholds["graph_pass_ratio_min"]
    checks: list[tuple[str, str, Callable[[Row], bool]]] = [
        ("decode passes ran without a CUDA graph", CUDA_GRAPH_PASS_RATIO,
         lambda r: r[CUDA_GRAPH_PASS_RATIO] < low),
        ("Decode batch log lines said 'cuda graph: False'", CUDA_GRAPH_FALSE_RATIO,
         lambda r: r[CUDA_GRAPH_FALSE_RATIO] > 1 - low),
    ]  # fmt: skip
    max_bs = inp.config.cuda_graph_max_bs if inp.config else None
    if max_bs:
        batch = batch_signal(inp)
        what = f"running batch per rank above the CUDA-graph max bs {max_bs}"
        checks.insert(0, (what, batch, lambda r: r[batch] > max_bs))
    return checks


def _busy_gate(signal: str) -> Callable[[Row], bool] | None:
    """Batch-size checks count busy samples only; the pass ratios exist only when decoding."""
    if signal in (CUDA_GRAPH_PASS_RATIO, CUDA_GRAPH_FALSE_RATIO):
        return None
    return lambda r: r[signal] > 0


def coverage_gap(inp: RuleInput) -> Coverage | None | NoData:
    """The first check that held frequently, None if none did, NoData if none had data."""
    seen = False
    for what, signal, predicate in _checks(inp):
        freq = frequently(inp.view, predicate, (signal,), inp.frequently_ratio, _busy_gate(signal))
        seen = seen or freq.considered > 0
        if freq.held:
            return Coverage(what, freq.ratio, freq.considered)
    return None if seen else NoData(_NO_GRAPH_DATA, inp.view.window_seconds)


def _raise_graph_bs(inp: RuleInput) -> Action:
    """Next of the guide's 512 / 768 above the p90 batch; pay for it with mem-fraction - 0.02."""
    config = inp.config
    if config is not None and config.disable_cuda_graph:
        return Action("re-enable CUDA graphs: drop --disable-cuda-graph from the launch command")
    flag = graph_flag(config.version if config else None)
    current = config.cuda_graph_max_bs if config else None
    p90 = per_rank_batch(inp.view, 0.9) or 0.0
    steps = (int(inp.thresholds["graph_bs_step_1"]), int(inp.thresholds["graph_bs_max"]))
    higher = [s for s in steps if s > (current or 0)]
    if not higher:
        return Action(f"{flag} is already {current}: lower --max-running-requests to {current}")
    suggested = next((s for s in higher if s >= p90), higher[-1])
    action = flag_action(flag, current, suggested, inp)
    mfs = config.mem_fraction_static if config else None
    pay = inp.thresholds["mem_fraction_cost"]
    lower = f"{mfs:g} -> {round(mfs - pay, 2):g}" if mfs else f"by about {pay:g}"
    return with_note(action, f"CUDA graphs take more memory: also lower {MEM_FLAG} {lower}")


def _check_coverage(inp: RuleInput) -> Outcome:
    """Frequently: per-rank batch > max bs (busy samples), or graph-less decode passes."""
    gap = coverage_gap(inp)
    if isinstance(gap, NoData) or gap is None:
        return gap or Pass()
    p90 = per_rank_batch(inp.view, 0.9)
    evidence = (
        f"{gap.what} in {gap.ratio:.0%} of {gap.samples} samples over "
        f"{format_duration(inp.view.window_seconds)}; running batch per rank p90 "
        f"{'n/a' if p90 is None else f'{p90:.0f}'}"
    )
    return Finding(evidence, _raise_graph_bs(inp), confidence_for(inp), gap.ratio, gap.samples)


CUDA_GRAPH_NOT_COVERING = Rule(
    id="cuda_graph_not_covering",
    severity=Severity.WARNING,
    summary="Decode batches frequently run without a CUDA graph (batch above --cuda-graph-max-bs).",
    action="Raise --cuda-graph-max-bs (512 / 768) and lower --mem-fraction-static a little.",
    source=GRAPH_SOURCE,
    signals=(NUM_RUNNING_REQS_MAX_RANK, CUDA_GRAPH_PASS_RATIO, CUDA_GRAPH_FALSE_RATIO),
    thresholds={
        "graph_pass_ratio_min": 0.5,  # a sample counts when most decode passes ran graph-less
        "graph_bs_step_1": 512.0,
        "graph_bs_max": 768.0,
        "mem_fraction_cost": 0.02,
    },
    check=_check_coverage,
)


def _enable_compile(_inp: RuleInput) -> Action:
    cache = "export TORCHINDUCTOR_CACHE_DIR=/var/cache/sglang/torchinductor"
    return Action(
        f"add --enable-torch-compile, and {cache} so the compile cache survives /tmp cleanup",
        "--enable-torch-compile",
        "false",
        "true",
        "the first start compiles (slow); share the cache directory between machines",
    )


def _check_compile(inp: RuleInput) -> Outcome:
    """torch.compile off, a small model (heuristic: the model path names <= 8B parameters,
    e.g. 'Llama-3.1-8B'), and the per-rank batch <= 32 in most busy samples."""
    config, th = inp.config, inp.thresholds
    if config is None or config.enable_torch_compile is None:
        why = inp.config_error or "/server_info did not report enable_torch_compile"
        return NoData(why, inp.view.window_seconds)
    if config.enable_torch_compile:
        return Pass(detail="torch.compile is on")
    params = model_params_billion(config.model_path)
    if params is None:
        return NoData(
            f"model size unknown: no '<N>B' in the model path {config.model_path!r}",
            inp.view.window_seconds,
        )
    if params > th["small_model_max_billion_params"]:
        return Pass(detail=f"{params:g}B parameters is not a small model")
    batch = batch_signal(inp)
    limit = th["small_batch_max"]
    freq = frequently(
        inp.view,
        lambda r: r[batch] <= limit,
        (batch,),
        inp.frequently_ratio,
        lambda r: r[batch] > 0,
    )
    if freq.considered == 0:
        return idle(inp)
    evidence = (
        f"{params:g}B-parameter model; running batch per rank <= {limit:g} in {freq.ratio:.0%} "
        f"of {freq.considered} busy samples; torch.compile off"
    )
    return judged(freq, inp, evidence, _enable_compile(inp))


TORCH_COMPILE_SMALL_BATCH = Rule(
    id="torch_compile_small_batch",
    severity=Severity.INFO,
    summary="A small model runs small batches without torch.compile, which speeds up just that.",
    action="Add --enable-torch-compile with a persistent TORCHINDUCTOR_CACHE_DIR.",
    source=COMPILE_SOURCE,
    signals=(NUM_RUNNING_REQS_MAX_RANK, NUM_RUNNING_REQS),
    thresholds={
        # Heuristic: "small model" = the model path names <= 8B parameters ("Llama-3.1-8B").
        "small_model_max_billion_params": 8.0,
        "small_batch_max": 32.0,  # SGLang's --torch-compile-max-bs default
    },
    check=_check_compile,
)
