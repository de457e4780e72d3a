"""Benchmark: `sglang-tuner check --log` on a big SGLang log, against `grep -c 'Decode batch'` on
the same file in the same run (the design's target: at most 5x grep's time; memory flat in the
log's size).

The log is generated from real line formats (v0.5.x: Decode and Prefill batch lines of one
DP-less server, HTTP access lines, a retraction now and then), one second of log time per ~20
lines. Both commands run as whole processes; the file is read once first so both find it in the
page cache. Run: `PYTHONPATH=daemon python bench/log_replay.py [--mb 1024] [--keep FILE]`.
"""

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DECODE = (
    "[{t}{r}] Decode batch, #running-req: {n}, #token: 300000, token usage: 0.73, cuda graph: "
    "True, gen throughput (token/s): 2500.00, #queue-req: {q}\n"
)
PREFILL = (
    "[{t}{r}] Prefill batch, #new-seq: 2, #new-token: 6000, #cached-token: 9000, token usage: "
    "0.70, #running-req: 90, #queue-req: {q}, #pending-token: 30000, cuda graph: False, input "
    "throughput (token/s): 18000.00\n"
)
HTTP = '[{t}] INFO:     127.0.0.1:60028 - "POST /generate HTTP/1.1" 200 OK\n'
RETRACT = (
    "[{t}{r}] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: "
    "512, #new_token_ratio: 0.4000 -> 0.5000\n"
)


def generate(path: Path, megabytes: int) -> int:
    """Write about `megabytes` MB of log; the lines written."""
    limit, written, lines, second = megabytes * 1_000_000, 0, 0, 0
    with path.open("w") as out:
        while written < limit:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(1_790_000_000 + second))
            block = [DECODE.format(t=stamp, r=" TP0", n=80 + i, q=second % 50) for i in range(12)]
            block += [PREFILL.format(t=stamp, r=" TP0", q=second % 50)] * 2
            block += [HTTP.format(t=stamp)] * 6
            if second % 97 == 0:
                block.append(RETRACT.format(t=stamp, r=" TP0"))
            text = "".join(block)
            out.write(text)
            written += len(text)
            lines += len(block)
            second += 1
    return lines


def timed(command: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS KiB) of one run of `command` as a whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # stdout into a pipe: GNU grep stops at its first match when it sees /dev/null
    subprocess.run(command, capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="log size in MB (1024)")
    parser.add_argument("--keep", type=Path, help="write the log here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "sglang.log"
        lines = generate(path, args.mb)
        size = path.stat().st_size
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # page cache
        grep = timed(["grep", "-c", "Decode batch", str(path)])
        check = timed([sys.executable, "-m", "sglang_tuner", "check", "--log", str(path)])
        grep2 = timed(["grep", "-c", "Decode batch", str(path)])
    grep_wall = min(grep[0], grep2[0])
    print(f"log: {size / 1e6:,.0f} MB, {lines:,} lines")
    print(f"grep -c 'Decode batch'       wall {grep_wall:7.2f} s")
    print(f"sglang-tuner check --log     wall {check[0]:7.2f} s  cpu {check[1]:7.2f} s")
    print(f"ratio check/grep             {check[0] / grep_wall:7.1f}x")
    print(f"check --log peak RSS         {check[2] / 1024:7.0f} MiB")
    print(f"check --log per MB           {check[0] / (size / 1e6) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
