"""Per-call latency through the Python host, the shape of the Rust host's
``examples/latency.rs`` (same operations, same stores), for issue notes:

    python tools/latency.py [N]

Each line gives wall time, calls per second and this thread's CPU time per
call, then the crossings per call: how many times the component called
into this host (``store#read``, ``store#write``, ``wasi:random/…``; each
costs a ctypes callback, the lifting of its arguments and the lowering of
its answer), counted on extra calls after the timed ones so the counting
never slows what is timed. PostgreSQL is
measured too when ``GAK_PG_DSN`` names a server (a fresh schema, dropped
afterwards). ``host/latency.py`` parses the lines up to ``µs/op``.

Not a test: speed is measured here, never asserted.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from typing import Callable

from gak import Action, Granted, Kernel, TaskSeed, _abi

#: Calls counted for crossings after the timed rounds.
COUNTED = 50


def crossings(n: int, first: int, op: Callable[[int], object]) -> str:
    """The host functions ``n`` calls of ``op`` called, per call."""
    with _abi.counting() as counts:
        for i in range(first, first + n):
            op(i)
    total = Counter(counts)
    per = sum(total.values()) / n
    detail = ", ".join(f"{name} {c / n:g}" for name, c in sorted(total.items()))
    return f"{per:>5.1f} crossings/op ({detail or 'none'})"


def measure(label: str, n: int, op: Callable[[int], object], rounds: int = 3) -> None:
    """Best of ``rounds`` runs of ``n`` calls (the least disturbed by other
    load on a shared machine), as wall time and as this thread's CPU time;
    then the crossings of :data:`COUNTED` more calls. ``op(i)`` gets
    indices from 0 to ``n // 10 + rounds * n + COUNTED``."""
    for i in range(n // 10):
        op(i)  # warm-up
    walls, cpus = [], []
    for r in range(rounds):
        first = n // 10 + r * n
        start, cpu = time.perf_counter(), time.thread_time()
        for i in range(first, first + n):
            op(i)
        walls.append((time.perf_counter() - start) / n)
        cpus.append((time.thread_time() - cpu) / n)
    per, per_cpu = min(walls), min(cpus)
    crossed = crossings(COUNTED, n // 10 + rounds * n, op)
    print(
        f"{label:<44} {per * 1e6:>9.1f} µs/op {1 / per:>9.0f} ops/s {per_cpu * 1e6:>9.1f} µs CPU/op {crossed}",
        flush=True,
    )


def run(url: str, n: int, shown: str = "", batch: int = 10_000) -> None:
    with Kernel.open(url) as kernel:
        print(f"-- {shown or url}")
        total = 3 * n + n // 10 + COUNTED
        for start in range(0, total, batch):
            kernel.taskboard.seed([TaskSeed(f"t{i}") for i in range(start, min(total, start + batch))])
        measure("taskboard.claim (fresh task)", n, lambda i: kernel.taskboard.claim(f"t{i}", "w", 60_000))
        measure(
            "sideeffect.acquire (fresh key)", n, lambda i: kernel.sideeffect.acquire(Action(f"k{i}", f"r{i}"), 60_000)
        )

        def replayed(_: int) -> None:
            a = Action("done-key", "r-done")
            g = kernel.sideeffect.acquire(a, 60_000)
            if isinstance(g, Granted):
                kernel.sideeffect.complete(a, g.lease, b"ok")

        measure("sideeffect.acquire (replayed key)", n, replayed)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    with tempfile.TemporaryDirectory() as d:
        run("memory:", n)
        run(f"sqlite:{os.path.join(d, 'full.db')}", n)
        run(f"sqlite:{os.path.join(d, 'normal.db')}?synchronous=normal", n)
    dsn = os.environ.get("GAK_PG_DSN")
    if dsn:
        from gak.stores.postgres import PostgresBackend

        schema = f"gak_latency_{uuid.uuid4().hex[:8]}"
        url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
        backend = PostgresBackend(url)
        try:
            # Every key a seed reads or writes holds an advisory lock until
            # it commits: PostgreSQL's lock table (max_locks_per_transaction,
            # 64 per connection by default) bounds a seed call.
            run(url, n, backend.describe(), batch=500)
        finally:
            backend.drop_schema()


if __name__ == "__main__":
    main()
