"""Step times of one simulated server: the sglang_physics step model with the server's knobs."""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_physics import Deployment, Perturbation, StepModel, padded_rows

from .gpus import Gpu
from .hardware import Knobs, deployment_for
from .llms import LlmSpec


@dataclass(frozen=True)
class Engine:
    """The step-time model of one server (knobs resolved), padded to its CUDA-graph sizes;
    `perturbation` draws its hardware and kernel constants away from sglang_physics's."""

    gpu: Gpu
    llm: LlmSpec
    knobs: Knobs
    capture_bs: tuple[int, ...] = ()
    perturbation: Perturbation = field(default_factory=Perturbation)
    derived: dict[str, float] = field(default_factory=dict, compare=False)
    step: StepModel = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        step = StepModel(self.gpu, self.llm, self.deployment, perturbation=self.perturbation)
        object.__setattr__(self, "step", step)  # frozen: set once, here
        self.derived.update(
            weights_s=step.weights_seconds(1),
            kv_s_per_token=step.kv_s_per_token,
            eager_cpu_s=step.eager_cpu_s,
            eager_gap_s=step.eager_gap_s,
        )

    @property
    def deployment(self) -> Deployment:
        """The server's parallel layout, dtypes and attention backend."""
        return deployment_for(self.knobs)

    def graph_size(self, batch: int) -> int:
        """The captured size a decode batch is padded to, or 0 when it runs eagerly."""
        return padded_rows(batch, self.capture_bs)

    def decode_seconds(self, batch: int, seq_sum: int) -> float:
        """One decode step of `batch` requests holding `seq_sum` KV tokens in total."""
        k, padded = self.knobs, self.graph_size(batch)
        compiled = k.enable_torch_compile and batch <= k.torch_compile_max_bs
        return self.step.decode_seconds(batch, seq_sum, padded, bool(padded), compiled)

    def prefill_seconds(self, new_tokens: int, attention_flops: float) -> float:
        """One prefill (extend) forward over `new_tokens`, run eagerly."""
        return self.step.prefill_seconds(new_tokens, attention_flops)

    def prefill_activation_gb(self, tokens: int, seqs: int) -> float:
        """Transient memory of a prefill forward: one layer's activations + fp32 logits."""
        act = tokens * self.llm.activation_bytes_per_token(self.knobs.tp_size)
        return (act + seqs * self.llm.vocab * 4) / 1024**3

    def eager_decode_gb(self, batch: int) -> float:
        """Transient memory of an eager decode forward (a graph's is preallocated)."""
        per_row = self.llm.activation_bytes_per_token(self.knobs.tp_size) + self.llm.vocab * 8
        return batch * per_row / 1024**3
