"""SGLang's performance physics: step times and memory of a model on a GPU, no scheduler.

May import: nothing outside `sglang_physics` (the standard library only): never the daemon
(sglang_tuner) nor the simulator (sglang_sim). Pure: no I/O, no clock. The simulator runs its
scheduler on it, and the daemon's predictor uses the same model to predict one server's change.

    from sglang_physics import GPUS, MODELS, Deployment, StepModel, kv_pool_tokens

    step = StepModel(GPUS["H100"], MODELS["llama-3.1-8b"], Deployment(tp=1))
    step.decode_seconds(batch=64, kv_tokens=64 * 2000)
    kv_pool_tokens(GPUS["H100"], MODELS["llama-3.1-8b"], Deployment(), 0.88)
"""

from .attention import backend_efficiency, default_backend, supported_backends
from .deployment import Deployment
from .gpu import GPUS, Gpu, gpu_named
from .graphs import default_capture_sizes, padded_rows, prefill_graph_sizes
from .memory import MemorySplit, kv_bytes_per_token, kv_pool_tokens, memory_split
from .model import MODELS, ModelSpec, model_named
from .perturbation import Perturbation
from .step import StepModel, blend, experts_touched

__all__ = [
    "GPUS",
    "MODELS",
    "Deployment",
    "Gpu",
    "MemorySplit",
    "ModelSpec",
    "Perturbation",
    "StepModel",
    "backend_efficiency",
    "blend",
    "default_backend",
    "default_capture_sizes",
    "experts_touched",
    "gpu_named",
    "kv_bytes_per_token",
    "kv_pool_tokens",
    "memory_split",
    "model_named",
    "padded_rows",
    "prefill_graph_sizes",
    "supported_backends",
]
