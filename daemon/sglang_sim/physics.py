"""Step times from the model and the GPU: bytes over bandwidth, FLOPs over peak, launch costs."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from .gpus import Gpu
from .hardware import Knobs
from .llms import LlmSpec

# Calibrated constants (docs/simulator.md, "Calibration", lists the anchors they were fit to).
# Share of peak HBM bandwidth decode kernels reach (GEMV weight reads, paged KV reads).
HBM_EFFICIENCY = 0.85
# Share of dense peak FLOPs reached by GEMMs: decode batches (tens to hundreds of rows) and
# prefill chunks (thousands of rows); attention in prefill runs lower.
DECODE_GEMM_EFFICIENCY = 0.6
PREFILL_GEMM_EFFICIENCY = 0.62
PREFILL_ATTENTION_EFFICIENCY = 0.45
# Per decode step outside the forward: graph replay, sampling, output processing, the part of
# the scheduler the overlap loop does not hide.
STEP_OVERHEAD_S = 0.7e-3
PREFILL_OVERHEAD_S = 1.5e-3  # batch preparation, radix-cache match and insert per prefill
# Eager (no CUDA graph) forwards: the GPU idles while the small kernels of each layer (norms,
# rotary, activation) wait for their launches: 45 us per layer, from vLLM's CUDA-graph PR
# (vllm-project/vllm#1440: Llama-2-7B, batch 1, 100 tokens in 1.20 s eager vs 1.05 s with graphs,
# +1.5 ms per 32-layer step). The CPU cannot launch a layer in less than ~80 us (Python + ~15
# launches), which bounds tiny models.
EAGER_CPU_PER_LAYER_S = 80e-6
EAGER_GPU_GAP_PER_LAYER_S = 45e-6
TP_LAUNCH_PER_LAYER_S = 30e-6  # two all-reduce launches per layer in eager mode
# One all-reduce: fixed latency over NVLink (custom all-reduce) or PCIe (NCCL ring).
NVLINK_ALLREDUCE_S = 8e-6
PCIE_ALLREDUCE_S = 30e-6
# torch.compile fuses small-batch decode's elementwise kernels: a modest gain, up to
# --torch-compile-max-bs, only inside CUDA graphs (SGLang compiles the captured sizes).
TORCH_COMPILE_FACTOR = 0.95
# Paged-attention KV-read efficiency relative to fa3 on Hopper (the fastest per the guide).
ATTENTION_EFFICIENCY = {
    "fa3": 1.0,
    "fa4": 1.0,
    "trtllm_mha": 1.0,
    "flashinfer": 0.95,
    "triton": 0.8,
    "torch_native": 0.3,
}


@dataclass(frozen=True)
class Engine:
    """The step-time model of one server (knobs resolved)."""

    gpu: Gpu
    llm: LlmSpec
    knobs: Knobs
    capture_bs: tuple[int, ...] = ()
    derived: dict[str, float] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        k, tp, gpu = self.knobs, self.knobs.tp_size, self.gpu
        bandwidth = gpu.bandwidth_tb_s * 1e12 * HBM_EFFICIENCY
        fp8 = k.quantization == "fp8" and gpu.fp8_tflops > 0
        attn = ATTENTION_EFFICIENCY.get(k.attention_backend or "fa3", 0.9)
        self.derived.update(
            weights_s=self.llm.weight_bytes(k.weight_bytes_per_param) / tp / bandwidth,
            kv_s_per_token=self.llm.kv_bytes_per_token(tp, k.kv_dtype_bytes) / bandwidth / attn,
            flops_per_s=(gpu.fp8_tflops if fp8 else gpu.bf16_tflops) * 1e12,
            attn_flops_per_s=gpu.bf16_tflops * 1e12 * PREFILL_ATTENTION_EFFICIENCY,
            eager_cpu_s=self.llm.layers * (EAGER_CPU_PER_LAYER_S + _tp_launch(tp)),
            eager_gap_s=self.llm.layers * EAGER_GPU_GAP_PER_LAYER_S,
        )

    def graph_size(self, batch: int) -> int:
        """The captured size a decode batch is padded to, or 0 when it runs eagerly."""
        sizes = self.capture_bs
        i = bisect_left(sizes, batch)
        return sizes[i] if i < len(sizes) else 0

    def decode_seconds(self, batch: int, seq_sum: int) -> float:
        """One decode step: max(weight reads, GEMM FLOPs) + KV reads + all-reduce + overhead."""
        d, k = self.derived, self.knobs
        padded = self.graph_size(batch)
        rows = padded or batch
        flops = self.llm.flops_per_token / k.tp_size * rows
        gemm = flops / (d["flops_per_s"] * DECODE_GEMM_EFFICIENCY)
        gpu = max(d["weights_s"], gemm) + seq_sum * d["kv_s_per_token"] + self._allreduce(rows)
        if not padded:
            return max(gpu + d["eager_gap_s"], d["eager_cpu_s"]) + STEP_OVERHEAD_S
        if k.enable_torch_compile and batch <= k.torch_compile_max_bs:
            gpu *= TORCH_COMPILE_FACTOR
        return gpu + STEP_OVERHEAD_S

    def prefill_seconds(self, new_tokens: int, attention_flops: float) -> float:
        """One prefill (extend) forward over `new_tokens`, run eagerly."""
        d = self.derived
        flops = self.llm.flops_per_token / self.knobs.tp_size * new_tokens
        gemm = flops / (d["flops_per_s"] * PREFILL_GEMM_EFFICIENCY)
        attention = attention_flops / self.knobs.tp_size / d["attn_flops_per_s"]
        gpu = max(d["weights_s"], gemm) + attention + self._allreduce(new_tokens)
        # a prefill's kernels run longer than their launches: no gaps, only the CPU bound
        return max(gpu, d["eager_cpu_s"]) + PREFILL_OVERHEAD_S

    def _allreduce(self, rows: int) -> float:
        """Two all-reduces per layer of rows x hidden BF16 values (ring: 2(tp-1)/tp of them)."""
        tp = self.knobs.tp_size
        if tp == 1:
            return 0.0
        latency = NVLINK_ALLREDUCE_S if self.gpu.link_gb_s >= 100 else PCIE_ALLREDUCE_S
        payload = rows * self.llm.hidden * 2 * 2 * (tp - 1) / tp
        return 2 * self.llm.layers * (latency + payload / (self.gpu.link_gb_s * 1e9))

    def prefill_activation_gb(self, tokens: int, seqs: int) -> float:
        """Transient memory of a prefill forward: one layer's activations + fp32 logits."""
        act = tokens * self.llm.activation_bytes_per_token(self.knobs.tp_size)
        return (act + seqs * self.llm.vocab * 4) / 1024**3

    def eager_decode_gb(self, batch: int) -> float:
        """Transient memory of an eager decode forward (a graph's is preallocated)."""
        per_row = self.llm.activation_bytes_per_token(self.knobs.tp_size) + self.llm.vocab * 8
        return batch * per_row / 1024**3


def _tp_launch(tp: int) -> float:
    return TP_LAUNCH_PER_LAYER_S if tp > 1 else 0.0
