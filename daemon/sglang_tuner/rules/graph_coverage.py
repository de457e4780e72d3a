"""Whether decode batches run as CUDA graphs: the coverage checks with data, and the first one
that held frequently (a batch above the max bs, or decode passes run without a graph)."""

from collections.abc import Callable
from dataclasses import dataclass

from sglang_tuner.model.advice import NoData
from sglang_tuner.model.signals import CUDA_GRAPH_FALSE_RATIO, CUDA_GRAPH_PASS_RATIO
from sglang_tuner.model.window import Row, frequently
from sglang_tuner.rules.base import RuleInput
from sglang_tuner.rules.units import batch_signal

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
