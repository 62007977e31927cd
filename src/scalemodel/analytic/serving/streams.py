"""Request streams: every request queued at once (max load, as ``trtllm-bench throughput`` and
vLLM's offline benchmark run), Poisson arrivals at a rate, or a fixed number of requests in
flight (a closed loop of clients); input and output lengths fixed, drawn from a parametric
form about the means, or drawn as (input, output) pairs from a bundled per-request table (serving.toml
``length_tables``: a dataset's measured lengths, scaled to the means)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache

import numpy as np

from ...errors import BadInput
from ...specs.sources import data_path, load_toml

FORMS = ("fixed", "normal", "uniform", "exponential")
# the per-request tables of serving.toml [length_tables] (kept in step with it by a test)
TABLES = ("sharegpt",)
LENGTH_DISTS = FORMS + TABLES


@dataclass(frozen=True)
class Stream:
    kind: str  # "max-load", "rate" or "concurrency"
    requests: int
    rate_per_s: float = 0.0
    concurrency: int = 0
    dist: str = "fixed"
    spread: float = 0.0  # relative standard deviation (normal) or half-width (uniform)
    seed: int = 0
    # a shared prompt prefix: the first prefix_tokens tokens of a prefix_share fraction of the
    # requests are the same (a system prompt, few-shot examples); see ``prefix_lengths``
    prefix_tokens: int = 0
    prefix_share: float = 1.0

    def label(self) -> str:
        pfx = (f"; the first {self.prefix_tokens:,} prompt tokens shared by "
               f"{self.prefix_share:.0%} of requests" if self.prefix_tokens else "")
        if self.kind == "rate":
            return f"Poisson arrivals at {self.rate_per_s:g} requests/s" + pfx
        if self.kind == "concurrency":
            return f"{self.concurrency} requests in flight (closed loop)" + pfx
        return f"max load: all {self.requests:,} requests queued at t = 0" + pfx


def check_prefix(prefix_tokens: int, prefix_share: float, isl: int) -> None:
    """A shared prefix no longer than the (mean) prompt and a share in [0, 1]; else bad input."""
    if prefix_tokens < 0:
        raise BadInput(f"--prefix-tokens: must be 0 or more, got {prefix_tokens}")
    if prefix_tokens > isl:
        raise BadInput(f"--prefix-tokens {prefix_tokens:,} is longer than the prompt "
                       f"(--isl {isl:,})")
    if not 0.0 <= prefix_share <= 1.0:
        raise BadInput(f"--prefix-share must be in [0, 1], got {prefix_share}")


def prefix_lengths(stream: Stream, isl: np.ndarray) -> np.ndarray:
    """The shared-prefix tokens of each request's prompt (0: none). Request j (in stream order,
    0-based) shares the prefix when floor((j + 1) f) > floor(j f), f = ``prefix_share``: the
    share spread evenly, no random draw (f = 1: every request, f = 0.5: every second one); a
    drawn prompt shorter than the prefix is the prefix's first tokens, all of it shared."""
    n = int(isl.size)
    if not stream.prefix_tokens or not n:
        return np.zeros(n, np.int64)
    j = np.arange(n)
    f = float(stream.prefix_share)
    on = np.floor((j + 1) * f + 1e-9) > np.floor(j * f + 1e-9)
    return np.where(on, np.minimum(int(stream.prefix_tokens), isl), 0).astype(np.int64)


def lengths(mean: int, n: int, dist: str, spread: float, rng: np.random.Generator,
            limit: int) -> np.ndarray:
    """n lengths around ``mean`` (whole tokens, 1 .. limit)."""
    if dist == "fixed":
        x = np.full(n, float(mean))
    elif dist == "normal":
        x = rng.normal(mean, spread * mean, n)
    elif dist == "uniform":
        x = rng.uniform(mean * (1 - spread), mean * (1 + spread), n)
    elif dist == "exponential":
        x = rng.exponential(mean, n)
    else:
        raise BadInput(f"--length-dist: {dist!r} is not one of {', '.join(LENGTH_DISTS)}")
    return np.clip(np.round(x), 1, limit).astype(np.int64)


@cache
def length_table(name: str) -> np.ndarray:
    """The bundled (input, output) token pairs of ``name`` (serving.toml [length_tables]), one row
    per request of the dataset, as an (n, 2) integer array in the file's order."""
    t = load_toml("serving.toml").get("length_tables", {}).get(name)
    if name not in TABLES or t is None:
        raise BadInput(f"length distribution {name!r} is not one of {', '.join(LENGTH_DISTS)}")
    with open(data_path(t["file"]), newline="") as f:
        rows = [(int(r["input_tokens"]), int(r["output_tokens"])) for r in csv.DictReader(f)]
    a = np.array(rows, dtype=np.int64)
    a.setflags(write=False)
    return a


def table_lengths(name: str, isl: int, osl: int, n: int, rng: np.random.Generator,
                  max_context: int) -> tuple[np.ndarray, np.ndarray]:
    """n (input, output) lengths drawn as pairs from table ``name``: distinct rows while n fits
    the table (as a benchmark samples distinct conversations), with replacement beyond; each axis
    scaled by isl / (the table's mean input) and osl / (its mean output), rounded, and kept
    within the context like the parametric forms."""
    t = length_table(name)
    idx = rng.choice(len(t), n, replace=n > len(t))
    mi, mo = t.mean(axis=0)
    i = np.clip(np.round(t[idx, 0] * (isl / mi)), 1, max_context - 1).astype(np.int64)
    o = np.clip(np.round(t[idx, 1] * (osl / mo)), 1, max_context).astype(np.int64)
    return i, o


def draw(stream: Stream, isl: int, osl: int, max_context: int, *, every: int = 1
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival seconds, input lengths, output lengths) of the stream's requests. A fixed
    concurrency is simulated as max load in waves of that many (the engine sees the same batch);
    its arrivals are set by the simulation of the first wave (see ``service``). ``every`` k > 1
    (a rate stream that is one replica's share of k replicas the requests are dealt to in turn):
    the arrivals are every k-th of a Poisson stream at k x the share's rate (Erlang-k gaps of
    the same mean), not a Poisson stream of its own."""
    if stream.requests < 1:
        raise BadInput(f"--requests: must be at least 1, got {stream.requests}")
    rng = np.random.default_rng(stream.seed)
    n = stream.requests
    if stream.dist in TABLES:
        i, o = table_lengths(stream.dist, isl, osl, n, rng, max_context)
    else:
        i = lengths(isl, n, stream.dist, stream.spread, rng, max_context - 1)
        o = lengths(osl, n, stream.dist, stream.spread, rng, max_context)
    o = np.minimum(o, max_context - i)
    if stream.kind == "rate":
        if not stream.rate_per_s > 0:
            raise BadInput(f"--rate: must be positive, got {stream.rate_per_s}")
        if every > 1:
            a = np.cumsum(rng.exponential(1.0 / (stream.rate_per_s * every), n * every))[::every]
        else:
            a = np.cumsum(rng.exponential(1.0 / stream.rate_per_s, n))
        a -= a[0]
    else:
        a = np.zeros(n)
    return a, i, o
