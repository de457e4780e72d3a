"""Forward-pass times of one SGLang server: bytes over bandwidth, FLOPs over peak, launch costs.

Constants are cited where they come from; /work/shared/reference/gpu-physics.md (an H200 run of a
Llama-3.1-8B-shaped decoder, 2026-11-26) is "the H200 measurement" below.
"""

from __future__ import annotations

from .attention import backend_efficiency, default_backend
from .deployment import Deployment
from .gpu import Gpu
from .model import ModelSpec
from .perturbation import NONE, Perturbation

# Share of peak HBM bandwidth decode kernels reach. H200 measurement: 0.85 for a 4 GiB read-only
# reduction, 0.78 for a batch-1 decode's weight reads; 0.85 also reproduces its GEMM stack.
HBM_EFFICIENCY = 0.85
# Share of dense peak FLOPs GEMMs reach: decode batches (tens to hundreds of rows) and prefill
# chunks (H200 measurement: 0.62 of peak for a prefill's GEMMs plus elementwise kernels).
DECODE_GEMM_EFFICIENCY = 0.6
PREFILL_GEMM_EFFICIENCY = 0.62
# Prefill attention in "causal FLOPs" (H200 measurement: cuDNN 0.37-0.59, FA2 0.24-0.32).
PREFILL_ATTENTION_EFFICIENCY = 0.45
# Decode attention where it is compute-bound (MLA's absorbed heads): an assumption, no anchor.
DECODE_ATTENTION_FLOP_EFFICIENCY = 0.5
# Per decode step outside the forward: graph replay, sampling, output processing, the part of
# the scheduler the overlap loop does not hide (fit to the ITL anchors in docs/simulator.md).
STEP_OVERHEAD_S = 0.7e-3
PREFILL_OVERHEAD_S = 1.5e-3  # batch preparation, radix-cache match and insert per prefill
# Eager forwards (no CUDA graph). H200 measurement: ~12.5 us of host CPU per kernel launch (eager
# decode is host-bound up to batch 64), and a graph saves ~1 us of GPU idle per launch once the
# GPU is the bound (batch 256). SGLang's Llama layer issues roughly 11-12 launches (an estimate
# from its code in gpu-physics.md, not measured); tp > 1 adds two all-reduce launches.
EAGER_CPU_PER_LAUNCH_S = 12.5e-6
EAGER_GPU_GAP_PER_LAUNCH_S = 1e-6
SGLANG_LAUNCHES_PER_LAYER = 11.5
TP_LAUNCHES_PER_LAYER = 2
# One all-reduce: fixed latency over NVLink (custom all-reduce) or PCIe (NCCL ring).
NVLINK_ALLREDUCE_S = 8e-6
PCIE_ALLREDUCE_S = 30e-6
# torch.compile fuses small-batch decode's elementwise kernels: a modest gain inside graphs.
TORCH_COMPILE_FACTOR = 0.95


def blend(a: float, b: float) -> float:
    """Smooth roofline max: (a^3 + b^3)^(1/3).

    H200 measurement, GEMM stack of a decode step: the hard max(weights, FLOPs) is 8-16 % low at
    batch 64-128 where both bounds are close; the cube blend lands within -5.3 % .. +5.1 % at
    batch 1-256 (-0.4 % at 128).
    """
    return float((a**3 + b**3) ** (1 / 3))


def experts_touched(experts: int, active: int, tokens: int) -> float:
    """Expected distinct experts a layer reads for `tokens` tokens routing to `active` of
    `experts` each (uniform routing): E * (1 - (1 - k/E)^B)."""
    if experts <= 0 or tokens <= 0:
        return 0.0
    return experts * (1 - (1 - active / experts) ** tokens)


class StepModel:
    """Step times of one server (one attention rank) for a model, a GPU and a deployment."""

    def __init__(
        self,
        gpu: Gpu,
        model: ModelSpec,
        deployment: Deployment | None = None,
        version: tuple[int, ...] = (0, 5, 23),
        launches_per_layer: float = SGLANG_LAUNCHES_PER_LAYER,
        perturbation: Perturbation = NONE,
    ) -> None:
        """perturbation: factors on the constants below (the simulator's perturbed world)."""
        self.gpu, self.model = gpu, model
        p = self.perturbation = perturbation
        d = self.deployment = deployment or Deployment()
        self.backend = d.attention_backend or default_backend(gpu, model, version)
        self.bytes_per_param = d.weight_bytes_per_param or float(model.dtype_bytes)
        fp8 = self.bytes_per_param <= 1 and gpu.fp8_tflops > 0
        self.flops_per_s = (gpu.fp8_tflops if fp8 else gpu.bf16_tflops) * 1e12
        self.bandwidth = gpu.bandwidth_tb_s * 1e12 * HBM_EFFICIENCY * p.hbm_bandwidth
        self.kv_bytes_per_token = model.kv_bytes_per_token(d.attn_tp, d.kv_dtype_bytes)
        attn = backend_efficiency(gpu, self.backend) * p.kv_read
        self.kv_s_per_token = self.kv_bytes_per_token / self.bandwidth / attn
        kv_flops = model.decode_attention_flops_per_kv_token() / d.attn_tp
        self.kv_flop_s_per_token = kv_flops / (gpu.bf16_tflops * 1e12 * attn
                                               * DECODE_ATTENTION_FLOP_EFFICIENCY
                                               * p.decode_attention_flops)  # fmt: skip
        # weights: attention per attention rank, the rest (embeddings, dense MLPs, shared
        # experts, router) sliced over tp, routed experts read only where tokens go
        self.attention_params_gpu = model.attention_params / d.attn_tp
        self.dense_params_gpu = (
            self.attention_params_gpu
            + (model.params - model.attention_params - model.routed_params) / d.tp
        )
        self.expert_params_gpu = model.expert_params * model.moe_layers / d.tp * p.moe_inefficiency
        launches = launches_per_layer + (TP_LAUNCHES_PER_LAYER if d.tp > 1 else 0)
        self.eager_cpu_s = model.layers * launches * EAGER_CPU_PER_LAUNCH_S * p.launch_cpu
        self.eager_gap_s = model.layers * launches * EAGER_GPU_GAP_PER_LAUNCH_S * p.launch_gap
        self.step_overhead_s = STEP_OVERHEAD_S * p.step_overhead
        self.prefill_overhead_s = PREFILL_OVERHEAD_S * p.prefill_overhead

    # -- pieces ------------------------------------------------------------------------------
    def weight_bytes_read(self, rows: int) -> float:
        """Weight bytes one GPU reads in a forward over `rows` tokens of one attention rank."""
        m = self.model
        touched = experts_touched(m.experts, m.active_experts, self.deployment.moe_rows(rows))
        params = self.dense_params_gpu + touched * self.expert_params_gpu
        return params * self.bytes_per_param

    def weights_seconds(self, rows: int = 1) -> float:
        """Time to read the weights a forward over `rows` tokens needs."""
        return self.weight_bytes_read(rows) / self.bandwidth

    def gemm_flops(self, rows: int) -> float:
        """Matmul FLOPs one GPU runs for `rows` tokens of one attention rank."""
        m, d = self.model, self.deployment
        attention = 2.0 * self.attention_params_gpu * rows
        rest = 2.0 * (m.active_params - m.attention_params) / d.tp * d.moe_rows(rows)
        routed = 2.0 * m.expert_params * m.active_experts * m.moe_layers / d.tp * d.moe_rows(rows)
        return attention + rest + (self.perturbation.moe_inefficiency - 1) * routed

    def allreduce_seconds(self, rows: int) -> float:
        """Two all-reduces per layer of rows x hidden BF16 values (ring: 2(tp-1)/tp of them)."""
        tp = self.deployment.tp
        if tp == 1:
            return 0.0
        rows = self.deployment.moe_rows(rows)
        p = self.perturbation
        latency = NVLINK_ALLREDUCE_S if self.gpu.has_nvlink else PCIE_ALLREDUCE_S
        latency *= p.allreduce_latency
        payload = rows * self.model.hidden * 2 * 2 * (tp - 1) / tp
        link = self.gpu.link_gb_s * 1e9 * p.link_bandwidth
        return 2 * self.model.layers * (latency + payload / link)

    def kv_read_seconds(self, kv_tokens: float) -> float:
        """Decode attention over `kv_tokens` cached tokens: bytes, or FLOPs where MLA needs more."""
        return blend(kv_tokens * self.kv_s_per_token, kv_tokens * self.kv_flop_s_per_token)

    # -- public step times -------------------------------------------------------------------
    def decode_forward_seconds(self, rows: int, kv_tokens: float) -> float:
        """GPU time of one decode forward inside a CUDA graph (`rows` = padded batch)."""
        gemm_peak = self.flops_per_s * DECODE_GEMM_EFFICIENCY * self.perturbation.decode_gemm
        gemm = self.gemm_flops(rows) / gemm_peak
        gpu = blend(self.weights_seconds(rows), gemm)
        return gpu + self.kv_read_seconds(kv_tokens) + self.allreduce_seconds(rows)

    def decode_seconds(
        self,
        batch: int,
        kv_tokens: float,
        rows: int = 0,
        cuda_graph: bool = True,
        torch_compile: bool = False,
    ) -> float:
        """One decode step of `batch` requests reading `kv_tokens` cached tokens in total.

        rows: the CUDA-graph size the batch is padded to (default: the batch). Eager steps
        are max(GPU time + a gap per launch, host time to launch the forward).
        """
        gpu = self.decode_forward_seconds(rows or batch, kv_tokens)
        if not cuda_graph:
            return max(gpu + self.eager_gap_s, self.eager_cpu_s) + self.step_overhead_s
        if torch_compile:
            gpu *= TORCH_COMPILE_FACTOR * self.perturbation.torch_compile
        return gpu + self.step_overhead_s

    def prefill_seconds(self, new_tokens: int, attention_flops: float | None = None) -> float:
        """One prefill (extend) forward over `new_tokens`, run eagerly.

        attention_flops: the batch's QK^T and PV FLOPs (ModelSpec.attention_flops); by default
        one fresh sequence of `new_tokens` (causal: half the pairs).
        """
        if attention_flops is None:
            attention_flops = self.model.attention_flops(new_tokens, new_tokens / 2)
        p = self.perturbation
        gemm_peak = self.flops_per_s * PREFILL_GEMM_EFFICIENCY * p.prefill_gemm
        gemm = self.gemm_flops(new_tokens) / gemm_peak
        attention_peak = self.gpu.bf16_tflops * 1e12 * PREFILL_ATTENTION_EFFICIENCY
        attention_peak *= p.prefill_attention
        attention = attention_flops / self.deployment.attn_tp / attention_peak
        gpu = blend(self.weights_seconds(new_tokens), gemm) + attention
        gpu += self.allreduce_seconds(new_tokens)
        # a prefill's kernels run longer than their launches: no gaps, only the host bound
        return max(gpu, self.eager_cpu_s) + self.prefill_overhead_s
