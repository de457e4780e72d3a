"""SGLang's startup and memory lines as numbers, every version 0.4-0.5 (the spellings are those
of the message catalogue, `messages/sglang_messages.json`):

- `Load weight begin. avail mem=79.10 GB`: free GPU memory before the weights (SGLang's "total");
- `Load weight end. [elapsed=…,] type=…, dtype=…, avail mem=63.2 GB[, mem usage=15.9 GB].`;
- `KV Cache is allocated. [dtype: …,] #tokens: N, K size: X GB, V size: Y GB` (MLA pools print
  `KV size: X GB`; 0.4.1-0.4.3 print no token count);
- `Memory pool end. avail mem=X GB`: free memory after the pools.

From them, the pool SGLang should have sized: `total × mem_fraction_static − weights` (its
`profile_max_num_token`: free after the weights − total × (1 − fraction)). A pool much larger
than that budget is an accounting bug; one far below it with no `--max-total-tokens` cap a sizing
bug (the pool is what every request's KV cache lives in).
"""

import re
from dataclasses import asdict, dataclass

from sglang_tuner.model.pool_budget import pool_budget_gb, pool_sizing

_GB = r"([0-9]+(?:\.[0-9]+)?) ?GB"
_BEGIN = re.compile(r"Load weight begin\. avail mem=" + _GB)
_END = re.compile(r"Load weight end\..*?avail mem=" + _GB + r"(?:, mem usage=" + _GB + ")?")
_KV = re.compile(r"KV Cache is allocated\.")
_TOKENS = re.compile(r"#tokens: (\d+)")
_K = re.compile(r"\bK size: " + _GB)
_V = re.compile(r"\bV size: " + _GB)
_KV_SIZE = re.compile(r"\bKV size: " + _GB)
_POOL_END = re.compile(r"Memory pool end\. avail mem=" + _GB)


@dataclass(slots=True)
class StartupMemory:
    """What one process's startup lines said, in GB and tokens (None: not said yet)."""

    before_load_gb: float | None = None
    after_load_gb: float | None = None
    weights_gb: float | None = None  # "mem usage" of the weights, else the free memory they took
    kv_tokens: int | None = None
    kv_pool_gb: float | None = None  # K + V (or the MLA pool's KV)
    after_pool_gb: float | None = None

    def read(self, line: str) -> bool:
        """Take what a startup line says; True when it was one."""
        if match := _BEGIN.search(line):
            for name in self.__slots__:  # a new process: the old numbers are gone
                setattr(self, name, None)
            self.before_load_gb = float(match.group(1))
        elif match := _END.search(line):
            self.after_load_gb = float(match.group(1))
            self.weights_gb = _weights(match.group(2), self.before_load_gb, self.after_load_gb)
        elif _KV.search(line):
            self._pool(line)
        elif match := _POOL_END.search(line):
            self.after_pool_gb = float(match.group(1))
        else:
            return False
        return True

    def _pool(self, line: str) -> None:
        """A pool's line: the largest of a process's pools is the target model's (a draft
        model's pool, printed after it, is smaller)."""
        k, v, kv = _K.search(line), _V.search(line), _KV_SIZE.search(line)
        size = float(k.group(1)) + float(v.group(1)) if k and v else None
        size = float(kv.group(1)) if size is None and kv else size
        if size is not None and self.kv_pool_gb is not None and size < self.kv_pool_gb:
            return
        tokens = _TOKENS.search(line)
        self.kv_tokens = int(tokens.group(1)) if tokens else self.kv_tokens
        self.kv_pool_gb = size if size is not None else self.kv_pool_gb

    def facts(self) -> dict[str, float]:
        """The numbers said so far, by name."""
        return {key: float(value) for key, value in asdict(self).items() if value is not None}

    def budget_gb(self, fraction: float) -> float | None:
        """The pool SGLang sizes under `fraction`: free after the weights - total x (1 - it)."""
        if self.before_load_gb is None or self.after_load_gb is None:
            return None
        return pool_budget_gb(self.before_load_gb, self.after_load_gb, fraction)

    def sizing(self, fraction: float, capped: bool = False) -> str | None:
        """What disagrees between the pool and its budget (None: they agree, or unknown);
        `capped`: --max-total-tokens (or a hybrid model's ratio) made the pool smaller
        (`model/pool_budget.py`, which the rule `kv_pool_sizing` reads from the signals too)."""
        before, after, pool = self.before_load_gb, self.after_load_gb, self.kv_pool_gb
        if before is None or after is None or pool is None:
            return None
        said = pool_sizing(before, after, self.weights_gb, pool, fraction, capped)
        return None if said is None else said.text


def _weights(usage: str | None, before: float | None, after: float) -> float | None:
    """The weights' memory: SGLang's "mem usage", else what loading took from free memory."""
    if usage is not None:
        return float(usage)
    return None if before is None else round(before - after, 2)
