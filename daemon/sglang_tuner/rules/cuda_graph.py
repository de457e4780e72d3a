"""Guide sections "Tune CUDA Graph Coverage" and "Additional Optimizations / Torch Compile"."""

from collections.abc import Callable
from dataclasses import dataclass, replace

from sglang_tuner.model.advice import Action, Finding, NoData, Outcome, Pass, Prediction, Severity
from sglang_tuner.model.flags import MEM_FRACTION_STATIC as MEM_FLAG
from sglang_tuner.model.signals import (
    CUDA_GRAPH_FALSE_RATIO,
    CUDA_GRAPH_PASS_RATIO,
    EAGER_BATCH_MAX,
    GEN_THROUGHPUT,
    NUM_RUNNING_REQS,
    NUM_RUNNING_REQS_MAX_RANK,
)
from sglang_tuner.model.window import Row, frequently
from sglang_tuner.predict.server_model import predict_graphs, severity_for
from sglang_tuner.predict.units import batch_signal, per_rank_batch
from sglang_tuner.rule import (
    DECODING_ROLES,
    Rule,
    RuleInput,
    confidence_for,
    config_unknown,
    flag_action,
    format_duration,
    idle,
    judged,
    predicted,
    with_expected,
    with_note,
)
from sglang_tuner.rules.memory import surplus_memory
from sglang_tuner.rules.sglang.flags import flag_name
from sglang_tuner.rules.sglang.graph_sizes import graph_bs_for
from sglang_tuner.rules.sglang.hardware import model_params_billion
from sglang_tuner.rules.sglang.versions import version_note

GRAPH_SOURCE = "Hyperparameter Tuning / Tune CUDA Graph Coverage"
COMPILE_SOURCE = "Hyperparameter Tuning / Additional Optimizations / Torch Compile"


def graph_flag(version: str | None) -> str:
    """The spelling this version takes (`--cuda-graph-max-bs-decode` from SGLang 0.5.14)."""
    return flag_name("--cuda-graph-max-bs", version) or "--cuda-graph-max-bs"


def _raise_graph_bs(inp: RuleInput) -> Action:
    """The p99 per-rank batch rounded up to a captured size (one step, not a jump to 512), and
    never below a batch the log shows ran without a graph (`EAGER_BATCH_MAX`: a log's samples
    keep each interval's latest batch line, which may be one the graphs covered); where startup
    left under 8 GB free, pay for the graphs with --mem-fraction-static - 0.02."""
    config = inp.config
    if config is not None and config.disable_cuda_graph:
        return Action("re-enable CUDA graphs: drop --disable-cuda-graph from the launch command")
    flag = graph_flag(config.version if config else None)
    current = config.cuda_graph_max_bs if config else None
    p99 = per_rank_batch(inp.view, 0.99)
    eager = inp.view.quantile(EAGER_BATCH_MAX, 1.0)
    if eager is not None:
        p99 = eager if p99 is None else max(p99, eager)
    ceiling = int(inp.thresholds["graph_bs_max"])
    if p99 is None:  # no batch sizes seen: the guide's first example value
        return _pay_for_graphs(
            with_note(flag_action(flag, current, 512, inp), "no running-batch sizes seen: the "
                      "guide's example value"), inp)  # fmt: skip
    version = config.version if config else None
    suggested = min(ceiling, graph_bs_for(max(p99, (current or 0) + 1), config))
    if current is not None and suggested <= current:
        return Action(f"{flag} is already {current}: lower --max-running-requests to {current}")
    expected = (
        f"decode batches up to {suggested} per rank run as CUDA graphs (now up to "
        f"{current or '?'}; p99 batch {p99:.0f}): those steps lose their eager launches "
        "(what that does to throughput, with any companion, is the prediction's)"
    )
    action = with_expected(flag_action(flag, current, suggested, inp), expected)
    if version is None:
        action = with_note(action, f"{version_note(version)} (before 0.5.14: --cuda-graph-max-bs)")
    return _pay_for_graphs(action, inp)


def _pay_for_graphs(action: Action, inp: RuleInput) -> Action:
    """Companion change: less static memory, unless startup left the guide's top band free."""
    surplus = surplus_memory(inp)
    if surplus is not None and surplus[0] >= inp.thresholds["free_gb_no_pay"]:
        return with_note(action, f"{surplus[1]} {surplus[0]:.1f} GB covers the extra graphs")
    mfs = inp.config.mem_fraction_static if inp.config else None
    pay = inp.thresholds["mem_fraction_cost"]
    if mfs is None:
        return with_note(action, f"CUDA graphs take more memory: also lower {MEM_FLAG} by {pay:g}")
    companion = flag_action(MEM_FLAG, mfs, round(mfs - pay, 2), inp)
    return replace(action, text=f"{action.text}, {companion.text}", companions=(companion,))


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
    action = _raise_graph_bs(inp)
    prediction = _predict(inp, action, gap.ratio)
    action = predicted(action, prediction)
    return Finding(evidence, action, confidence_for(inp), gap.ratio, gap.samples,
                   severity_for(prediction, Severity.INFO))  # fmt: skip


def _predict(inp: RuleInput, action: Action, uncovered: float) -> Prediction:
    """The server model's figure for graphs up to the suggested size (re-enabled: the default
    160), with the companion --mem-fraction-static cut where there is one."""
    try:
        new_bs = int(float(action.suggested or "160"))
    except ValueError:
        return Prediction("tok/s", None, basis="the suggested CUDA-graph size is not a number")
    companion = next((c for c in action.companions if c.flag == MEM_FLAG), None)
    fraction = float(companion.suggested) if companion and companion.suggested else None
    return predict_graphs(inp, new_bs, uncovered, fraction)


CUDA_GRAPH_NOT_COVERING = Rule(
    id="cuda_graph_not_covering",
    roles=DECODING_ROLES,
    # The finding's severity is the server model's: a warning where the eager launches saved
    # are predicted to gain >= 5 % tokens/s on this server, else (or without a prediction) info.
    measured=(
        "graded per server by the predicted gain (predict/server_model.py: the eager steps' "
        "launch cost on this model and GPU); the closed-loop matrix (docs/performance.md) "
        "compares prediction and measurement"
    ),
    severity=Severity.WARNING,
    summary="Decode batches frequently run without a CUDA graph (batch above --cuda-graph-max-bs).",
    action="Raise --cuda-graph-max-bs (512 / 768) and lower --mem-fraction-static a little.",
    source=GRAPH_SOURCE,
    signals=(
        NUM_RUNNING_REQS_MAX_RANK,
        CUDA_GRAPH_PASS_RATIO,
        CUDA_GRAPH_FALSE_RATIO,
        EAGER_BATCH_MAX,
        GEN_THROUGHPUT,
        NUM_RUNNING_REQS,
    ),  # fmt: skip
    thresholds={
        "graph_pass_ratio_min": 0.5,
        "graph_bs_max": 768.0,
        "mem_fraction_cost": 0.02,
        "free_gb_no_pay": 8.0,
    },
    provenance={
        "graph_pass_ratio_min": "ours: a sample counts when most of its decode passes ran "
        "without a graph",
        "graph_bs_max": "guide (newest): 'to a larger value (e.g., 512, 768)'; the largest "
        "example is our cap",
        "mem_fraction_cost": "ours: the guide says 'reduce --mem-fraction-static at the same "
        "time' without a number",
        "free_gb_no_pay": "guide (newest): the top of the 5-8 GB 'good' band; above it the "
        "extra graphs fit without lowering --mem-fraction-static",
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
        expected="shorter decode steps at batches up to 32 (modest; benchmark it); the first "
        "start takes minutes longer",
    )


def _check_compile(inp: RuleInput) -> Outcome:
    """torch.compile off, a small model (heuristic: the model path names <= 8B parameters,
    e.g. 'Llama-3.1-8B'), and the per-rank batch <= 32 in most busy samples."""
    config, th = inp.config, inp.thresholds
    if config is None or config.enable_torch_compile is None:
        why = (
            f"torch.compile unknown ({config_unknown(inp)})"
            if config is None
            else "/server_info did not report enable_torch_compile"
        )
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
    return judged(freq, inp, evidence, _enable_compile)


TORCH_COMPILE_SMALL_BATCH = Rule(
    id="torch_compile_small_batch",
    roles=DECODING_ROLES,
    severity=Severity.INFO,
    summary="A small model runs small batches without torch.compile, which speeds up just that.",
    action="Add --enable-torch-compile with a persistent TORCHINDUCTOR_CACHE_DIR.",
    source=COMPILE_SOURCE,
    signals=(NUM_RUNNING_REQS_MAX_RANK, NUM_RUNNING_REQS),
    thresholds={"small_model_max_billion_params": 8.0, "small_batch_max": 32.0},
    provenance={
        "small_model_max_billion_params": "ours: the guide says 'small models' without a "
        "size; read from '<N>B' in the model path",
        "small_batch_max": "SGLang's default --torch-compile-max-bs (the batches it compiles)",
    },
    check=_check_compile,
)


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
