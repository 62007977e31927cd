"""Results of the web app's computations, kept by their validated inputs.

The key is the command and the namespace its own parser produced after the bounds were checked,
so ``batch=8``, ``batch=08`` and an omitted field equal to its default share one entry, and a
question page, its tool page and its API call share their computation. Not kept: commands that
measure or write something at the moment they run (benchmarks, builds, live runs, billing with
a ledger), requests that name a file (the file may change), and ``--live`` reruns.
"""

from __future__ import annotations

import argparse
import threading
from collections import OrderedDict
from typing import Any

# command paths whose result depends on when (or on which machine) they run
NO_CACHE = frozenset({"comm/bench", "gpu/bench", "gpu/build", "triage/run", "bill"})
# namespace entries that say how to print, not what to compute
_OUTPUT = frozenset({"run", "json", "markdown", "plot"})
MAX_ENTRIES = 256


def _frozen(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((str(k), _frozen(x)) for k, x in v.items()))
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return repr(v)


def key_of(path: str, ns: argparse.Namespace, named_file: bool) -> tuple[Any, ...] | None:
    """The cache key of a parsed request, or None when its result must not be kept."""
    if path in NO_CACHE or named_file or getattr(ns, "live", False):
        return None
    items = tuple(sorted((k, _frozen(v)) for k, v in vars(ns).items() if k not in _OUTPUT))
    return (path, items)


class Cache:
    """A small least-recently-used map, safe to share between threads. Pinned entries (the
    classic answers of the question pages, some of which take seconds) are never evicted."""

    def __init__(self, size: int = MAX_ENTRIES) -> None:
        self.size = size
        self._d: OrderedDict[Any, Any] = OrderedDict()
        self._pinned: dict[Any, Any] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._pinned:
                self.hits += 1
                return self._pinned[key]
            if key in self._d:
                self._d.move_to_end(key)
                self.hits += 1
                return self._d[key]
            self.misses += 1
            return None

    def put(self, key: Any, value: Any, *, pin: bool = False) -> None:
        with self._lock:
            if pin:
                self._pinned[key] = value
                self._d.pop(key, None)
                return
            if key in self._pinned:
                return
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._pinned.clear()

    def __len__(self) -> int:
        return len(self._d) + len(self._pinned)
