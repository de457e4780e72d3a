"""Read the NVIDIA DCGM exporter: GPU model and free framebuffer memory."""

from sglang_tuner.model import signals as s
from sglang_tuner.sources.exposition import parse_exposition
from sglang_tuner.sources.exposition_labels import LabelCache
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.scrape import ScrapeError, fetch_body
from sglang_tuner.sources.timeout import timeout

FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB, one series per GPU, label modelName
MAX_BODY_BYTES = 16 * 1024 * 1024
GPU_MODEL = "gpu_model"  # key of the GPU model string in fetch_dcgm's result


def parse_dcgm(text: str | bytes) -> dict[str, float | str]:
    """Free framebuffer (the smallest over the node's GPUs, GB) and the GPU model from DCGM text."""
    series = parse_exposition(text, [FB_FREE[5:]], prefixes=("DCGM_",)).samples
    rows = series.get(FB_FREE[5:], [])
    if not rows:
        return {}
    labels = LabelCache()
    values: dict[str, float | str] = {s.GPU_FB_FREE_GB: min(v for _, v in rows) / 1024.0}
    model = next((labels(raw).get("modelName") for raw, _ in rows if "modelName" in raw), None)
    if model:
        values[GPU_MODEL] = model
    return values


async def fetch_dcgm(
    client: HttpClient, url: str, *, timeout_seconds: float
) -> dict[str, float | str]:
    """GET the exporter's `/metrics` (appended if missing); {} when unreachable or empty."""
    metrics_url = url if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"
    try:
        async with timeout(timeout_seconds):
            body = await fetch_body(client, metrics_url, MAX_BODY_BYTES)
        return parse_dcgm(body)
    except (TimeoutError, ScrapeError, ValueError):
        return {}
