"""A retraction storm the predictor's and the rule's tests share: an 8B on an L40S with a
100k-token pool, full (0.97), its batch swinging 20-34 per step while 30 requests a minute are
retracted; 2 requests/s finish with 425 output tokens each."""

from sglang_tuner.model.server_config import ServerConfig

SERVER = ServerConfig(
    model_path="meta-llama/Llama-3.1-8B-Instruct", gpu_model="NVIDIA L40S",
    max_total_num_tokens=100_000, schedule_conservativeness=1.0, max_running_requests=64,
    disable_radix_cache=False,
)  # fmt: skip
STORM = {
    "num_running_reqs": " ".join(["20 34"] * 10), "num_queue_reqs": "40x20",
    "token_usage": "0.97x20", "gen_throughput": " ".join(["700 1000"] * 10),
    "retractions_per_minute": "30x20", "request_rate": "2x20",
    "generation_tokens_rate": "850x20", "prompt_tokens_rate": "4000x20",
    "prompt_tokens_mean": "2000x20", "evicted_tokens_rate": "500x20",
}  # fmt: skip
