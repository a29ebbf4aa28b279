"""Per-call latency through the Python host, the shape of the Rust host's
``examples/latency.rs`` (same operations, same stores), for issue notes:

    python tools/latency.py [N]

Not a test: speed is measured here, never asserted.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Callable

from gak import Action, Granted, Kernel, TaskSeed


def measure(label: str, n: int, op: Callable[[int], object], rounds: int = 3) -> None:
    """Best of ``rounds`` runs of ``n`` calls (the least disturbed by other
    load on a shared machine), as wall time and as this thread's CPU time."""
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
    print(f"{label:<44} {per * 1e6:>9.1f} µs/op {1 / per:>9.0f} ops/s {per_cpu * 1e6:>9.1f} µs CPU/op", flush=True)


def run(url: str, n: int) -> None:
    with Kernel.open(url) as kernel:
        print(f"-- {url}")
        total = 3 * n + n // 10
        for start in range(0, total, 10_000):
            kernel.taskboard.seed([TaskSeed(f"t{i}") for i in range(start, min(total, start + 10_000))])
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


if __name__ == "__main__":
    main()
