"""`/server_info` and `/model_info` bodies with each SGLang version's field names."""

from __future__ import annotations

from typing import Any

from .model import ServerModel

CUDA_GRAPH_CONFIG_SINCE = (0, 5, 14)
FAKE_API_KEY = "sk-sim-not-a-real-key"


# ServerArgs fields the simulator never varies, with the values SGLang resolves them to.
FIXED_ARGS: dict[str, Any] = {
    "host": "127.0.0.1", "dtype": "auto", "context_length": None, "max_queued_requests": None,
    "max_total_tokens": None, "pp_size": 1,
    "page_size": 1, "stream_interval": 1, "enable_mixed_chunk": False, "cuda_graph_bs": None,
    "speculative_algorithm": None, "enable_hierarchical_cache": False, "log_level": "info",
}  # fmt: skip


def server_args(model: ServerModel, port: int, api_key: str | None) -> dict[str, Any]:
    """The ServerArgs fields a tuning rule reads, as the server reports them."""
    cfg, v, knobs = model.config, model.version, model.knobs
    path = cfg.llm.path
    backend = cfg.knobs.attention_backend or (knobs.attention_backend if v >= (0, 5, 6) else None)
    args: dict[str, Any] = {
        "model_path": path, "tokenizer_path": path, "served_model_name": path, "port": port,
        "mem_fraction_static": knobs.mem_fraction_static,
        "max_running_requests": knobs.max_running_requests,
        "chunked_prefill_size": knobs.chunked_prefill_size,
        "max_prefill_tokens": knobs.max_prefill_tokens,
        "schedule_policy": knobs.schedule_policy,
        "schedule_conservativeness": knobs.schedule_conservativeness,
        "tp_size": knobs.tp_size, "dp_size": knobs.dp_size, "ep_size": knobs.ep_size,
        "enable_dp_attention": knobs.enable_dp_attention,
        "attention_backend": backend,  # resolved in ServerArgs from 0.5.6
        "kv_cache_dtype": knobs.kv_cache_dtype, "quantization": knobs.quantization,
        "disable_radix_cache": knobs.disable_radix_cache,
        "enable_torch_compile": knobs.enable_torch_compile,
        "torch_compile_max_bs": knobs.torch_compile_max_bs,
        "enable_metrics": knobs.enable_metrics, "decode_log_interval": knobs.decode_log_interval,
        "random_seed": model.seed, "api_key": api_key or FAKE_API_KEY, **FIXED_ARGS,
    }  # fmt: skip
    if v >= (0, 5, 9):
        args["ssl_keyfile_password"] = "sim-keyfile-password"
    if v >= (0, 5, 17):
        args["admin_api_key"] = "sk-sim-admin-not-real"
    _graph_fields(args, model)
    return args


def _graph_fields(args: dict[str, Any], model: ServerModel) -> None:
    knobs, disabled = model.knobs, model.knobs.disable_cuda_graph
    if model.version < CUDA_GRAPH_CONFIG_SINCE:
        args["cuda_graph_max_bs"] = knobs.cuda_graph_max_bs
        args["disable_cuda_graph"] = disabled
        return
    # ServerArgs keeps the CLI value (None unless set); the resolved one is in cuda_graph_config
    args["cuda_graph_max_bs_decode"] = model.config.knobs.cuda_graph_max_bs or None
    args["cuda_graph_max_bs_prefill"] = None
    args["disable_cuda_graph"] = disabled
    args["cuda_graph_config"] = {
        "decode": {
            "backend": "disabled" if disabled else "full",
            "max_bs": knobs.cuda_graph_max_bs,
            "bs": list(model.plan.capture_bs),
        },
        "prefill": {"backend": "piecewise", "max_bs": 8192, "bs": None},
    }


def _memory_usage(model: ServerModel) -> dict[str, Any]:
    plan, v = model.plan, model.version
    usage: dict[str, Any] = {
        "weight": round(plan.weight_gb, 2),
        "kvcache": round(plan.kv_cache_gb, 2),
        "token_capacity": plan.max_total_num_tokens,
    }
    if v < (0, 5, 0):
        usage["cuda_graph"] = round(plan.graph_gb, 2)
    elif v < (0, 5, 17):
        usage["graph"] = round(plan.graph_gb, 2)
    else:
        usage["startup_available"] = round(plan.available_gb, 2)
        usage["token_capacity_swa"] = 0
        usage["graph"] = {"decode": round(plan.graph_gb, 2)}
    return usage


def server_info(model: ServerModel, port: int, api_key: str | None) -> dict[str, Any]:
    """The /server_info (and /get_server_info) body."""
    args = server_args(model, port, api_key)
    states = []
    for rank in model.ranks:
        state = dict(
            args,
            attention_backend=model.knobs.attention_backend,
            last_gen_throughput=rank.gauges.get("gen_throughput", 0.0),
            memory_usage=_memory_usage(model),
        )
        if model.version >= (0, 5, 9):
            state["effective_max_running_requests_per_dp"] = model.plan.max_running_requests
        states.append(state)
    body = dict(args)
    body.update(
        status="ready",
        max_total_num_tokens=model.plan.max_total_num_tokens,
        max_req_input_len=model.config.llm.context_len - 1,
        internal_states=states,
        version=model.config.version,
    )
    return body


def model_info(model: ServerModel) -> dict[str, Any]:
    """The /model_info (and /get_model_info) body."""
    llm, v = model.config.llm, model.version
    body: dict[str, Any] = {
        "model_path": llm.path,
        "tokenizer_path": llm.path,
        "is_generation": True,
        "preferred_sampling_params": None,
    }
    if v >= (0, 5, 0):
        body.update(
            weight_version="default", has_image_understanding=False, has_audio_understanding=False
        )
    if v >= (0, 5, 17):
        body.update(model_type=llm.model_type, architectures=[llm.architecture])
    return body


def info_paths(version: tuple[int, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(server-info paths, model-info paths) this version serves; `/server_info` came in 0.5."""
    if version < (0, 5, 0):
        return ("/get_server_info",), ("/get_model_info",)
    return ("/server_info", "/get_server_info"), ("/model_info", "/get_model_info")
