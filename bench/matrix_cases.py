"""The randomized closed-loop matrix's cases: one server drawn per seed, never the same list twice.

A case is model x GPU layout x SGLang version x workload x profile x one mis-set flag (or none),
all drawn from `random.Random(seed)`, with the world's constants drawn by
`sglang_sim.draw_perturbation(seed, spread)`: the same seed replays the same case in the same
world. Kinds (weights in KINDS): offline on any pair that fits, online chat, prefill-bound
(long prompts, short answers), DeepSeek-V3 with DP attention online, and small cards (<= 48 GB)
at the version's own defaults (no flag but the mis-set one).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from sglang_physics import GPUS, MODELS, Deployment, Perturbation, memory_split
from sglang_sim import VERSIONS, ServerSpec, draw_perturbation
from sglang_sim.fleet import check_spec, config_for
from sglang_sim.model import build

KINDS: Mapping[str, float] = {
    "offline": 0.26, "online": 0.2, "prefill": 0.16, "dpattn-online": 0.1, "small-defaults": 0.28,
}  # fmt: skip
SMALL_GPUS = ("L4", "A10", "RTX4090", "A100-40GB", "L40S")
SMALL_MODELS = ("llama-3.2-1b", "llama-3.1-8b", "qwen3-8b")
BIG_GPUS = ("A100", "H100", "H200", "H20", "B200", "L40S")
DENSE_AND_MOE = ("llama-3.1-8b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "llama-3.1-70b")
LOW = "low"  # the weights' share of memory plus a third of what 0.89 leaves the KV pool
# one mis-set flag per case (None: a start that is already right); the best single change sets
# it back to the scenario's value or the version's default
MISSET: dict[str, tuple[tuple[str, str] | None, ...]] = {
    "offline": (
        None, ("mem_fraction_static", LOW), ("mem_fraction_static", "0.95"),
        ("schedule_conservativeness", "2.2"), ("schedule_conservativeness", "0.3"),
        ("cuda_graph_max_bs", "32"), ("schedule_policy", "lpm"),
        ("chunked_prefill_size", "16384"),
    ),
    "online": (
        None, ("max_running_requests", "1024"), ("mem_fraction_static", LOW),
        ("cuda_graph_max_bs", "16"), ("schedule_conservativeness", "2.2"),
    ),
}  # fmt: skip
MISSET["prefill"] = (*MISSET["offline"], ("chunked_prefill_size", "512"))
MISSET["small-defaults"] = MISSET["offline"]
MISSET["dpattn-online"] = (
    None, ("max_running_requests", "4096"), ("mem_fraction_static", LOW),
    ("schedule_conservativeness", "2.2"),
)  # fmt: skip


@dataclass(frozen=True)
class Case:
    """One drawn server: what the simulator runs and the daemon watches."""

    seed: int
    kind: str
    version: str
    model: str
    gpu: str
    layout: Mapping[str, str]
    misset: tuple[str, str] | None
    load: Mapping[str, str]
    profile: str
    defaults: bool
    spread: float
    perturbation: Perturbation = field(default_factory=Perturbation)

    @property
    def name(self) -> str:
        """`model/GPUxN[-dpattn]` as the reports write it."""
        tp = int(self.layout.get("tp_size", 1))
        dp = "-dpattn" if self.layout.get("enable_dp_attention") == "true" else ""
        return f"{self.model}/{self.gpu}" + (f"x{tp}" if tp > 1 else "") + dp

    @property
    def flags(self) -> dict[str, str]:
        """The layout and the mis-set flag, as the simulator takes them."""
        return {**self.layout, **dict([self.misset] if self.misset else [])}

    @property
    def start(self) -> str:
        """The mis-set flag as `flag=value`, or `right` for none."""
        return f"{self.misset[0]}={self.misset[1]}" if self.misset else "right"

    def spec(self, flags: Mapping[str, str] | None = None) -> ServerSpec:
        """The simulator's spec of this case (`flags` in place of the case's own)."""
        flags = self.flags if flags is None else flags
        return ServerSpec(
            "healthy", self.version, flags=tuple(flags.items()), gpu=self.gpu, model=self.model,
            load=tuple(self.load.items()), perturbation=self.perturbation, defaults=self.defaults,
        )  # fmt: skip


def draw(seed: int, spread: float, tries: int = 200) -> Case:
    """The case of `seed`: drawn until the server starts (its weights fit, its flags valid)."""
    rng = random.Random(f"case/{seed}")
    for _ in range(tries):
        case = _draw_once(rng, seed, spread)
        if case is not None:
            return case
    raise RuntimeError(f"seed {seed}: no valid case in {tries} draws")


def _draw_once(rng: random.Random, seed: int, spread: float) -> Case | None:
    kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    version = rng.choice(VERSIONS)
    model, gpu, layout = _pair(rng, kind)
    if layout is None:
        return None
    load, profile = _load(rng, kind)
    misset = rng.choice(MISSET[kind])
    if misset and misset[0] == "max_running_requests" and profile == "offline":
        misset = None
    case = Case(
        seed, kind, version, model, gpu, layout, None, load, profile,
        defaults=kind == "small-defaults" or rng.random() < 0.3, spread=spread,
        perturbation=draw_perturbation(seed, spread),
    )  # fmt: skip
    if misset and misset[1] == LOW:
        misset = (misset[0], f"{low_fraction(gpu, model, layout):.2f}")
    case = Case(**{**case.__dict__, "misset": misset})
    return case if _starts(case) else None


def _pair(rng: random.Random, kind: str) -> tuple[str, str, dict[str, str] | None]:
    if kind == "dpattn-online":
        gpu, n = rng.choice(("H200", "B200")), 8
        flags = {"tp_size": str(n), "dp_size": str(n), "enable_dp_attention": "true"}
        return "deepseek-v3", gpu, {**flags, "ep_size": str(n)}
    if kind == "small-defaults":
        model, gpu = rng.choice(SMALL_MODELS), rng.choice(SMALL_GPUS)
    else:
        model, gpu = rng.choice(DENSE_AND_MOE), rng.choice(BIG_GPUS)
    tp = _smallest_tp(model, gpu)
    if tp is None:
        return model, gpu, None
    if kind != "small-defaults" and tp < 8 and rng.random() < 0.15:
        tp *= 2  # more GPUs than the weights need now and then
    layout = {"tp_size": str(tp)} if tp > 1 else {}
    if GPUS[gpu].arch in ("ampere", "ada") and rng.random() < 0.2:
        layout["attention_backend"] = "fa3"  # SGLang runs fa3 on SM8x too (not the default)
    return model, gpu, layout


def _smallest_tp(model: str, gpu: str) -> int | None:
    """The fewest GPUs (1, 2, 4, 8) whose memory holds the weights with half of it to spare."""
    for tp in (1, 2, 4, 8):
        split = memory_split(GPUS[gpu], MODELS[model], Deployment(tp=tp), 0.88)
        if split.weight_gib <= 0.5 * split.total_gib:
            return tp
    return None


def _load(rng: random.Random, kind: str) -> tuple[dict[str, str], str]:
    """Load fields over the busy scenario's, and the target's profile."""
    clients = str(int(math.exp(rng.uniform(math.log(48), math.log(2048)))))
    chat = {
        "clients": clients, "prompt_mean": str(rng.choice((300, 600, 1200))),
        "max_new_tokens": str(rng.choice((256, 512))), "eos_fraction": "0.2",
        "eos_max_tokens": "0", "streaming_fraction": "1.0",
    }  # fmt: skip
    if kind == "online":
        return chat, "online"
    if kind == "dpattn-online":
        big = str(int(math.exp(rng.uniform(math.log(512), math.log(4096)))))
        return {**chat, "clients": big}, "online"
    if kind == "prefill":
        prefill = {
            "clients": str(rng.choice((32, 96, 256))),
            "prompt_mean": str(rng.choice((6000, 10000, 16000))),
            "max_new_tokens": str(rng.choice((32, 128))), "eos_fraction": "0.3",
            "eos_max_tokens": "0",
        }  # fmt: skip
        return prefill, rng.choice(("offline", "online"))
    if kind == "small-defaults" and rng.random() < 0.4:
        return {**chat, "clients": str(min(int(clients), 512))}, "online"
    long_decode = {"prompt_mean": "1000", "max_new_tokens": "4096", "eos_max_tokens": "2000"}
    return (long_decode if rng.random() < 0.3 else {}), "offline"


def low_fraction(gpu: str, model: str, layout: Mapping[str, str]) -> float:
    """The weights' share of GPU memory plus a third of what 0.89 leaves the KV pool."""
    deployment = Deployment(
        tp=int(layout.get("tp_size", 1)), dp=int(layout.get("dp_size", 1)),
        dp_attention=layout.get("enable_dp_attention") == "true",
        ep=int(layout.get("ep_size", 1)),
    )  # fmt: skip
    split = memory_split(GPUS[gpu], MODELS[model], deployment, 0.89)
    weights = split.weight_gib / split.total_gib
    return round(weights + (0.89 - weights) / 3, 2)


def _starts(case: Case) -> bool:
    """The start without the mis-set flag boots (a mis-set start may crash: that is the case)."""
    right = case.spec(
        {k: v for k, v in case.flags.items() if not case.misset or k != case.misset[0]}
    )
    try:
        check_spec(right)
        check_spec(case.spec())
    except ValueError:
        return False
    _knobs, plan, _engine = build(config_for(right))
    return not plan.failure
