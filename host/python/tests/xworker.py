"""The cross-language worker (protocol v1, ``host/HOSTS.md``), a test tool
outside the installed package:

    python host/python/tests/xworker.py --store URL --worker NAME --index N --tasks T \\
        --rounds R --keys K --sink-rounds S \\
        [--barrier DIR --parties P] [--hold-ms H]

Three phases against a shared store (claims, effects, a fenced ledger), one
JSON object per line on stdout. Any unexpected error exits non-zero with the
error on stderr. It is a load generator: the audit lives in the test.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from gak.errors import GakError, Refused
from gak.kernel import Downstream, Kernel
from gak.types import Action, Contended, Granted, InFlight, Replayed, RetrySafety

LEASE = 60_000
MAX_TRIES = 2000


class Worker:
    def __init__(self, kernel: Kernel, name: str, hold_ms: int = 0) -> None:
        self.kernel = kernel
        self.name = name
        self.hold_ms = hold_ms

    def emit(self, event: str, **fields: Any) -> None:
        line = {"t": time.time_ns() // 1_000_000, "worker": self.name, "lang": "python", "event": event, **fields}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    def claims(self, tasks: int, rounds: int) -> None:
        board = self.kernel.taskboard
        for r in range(rounds):
            task = f"t{r % tasks}"
            try:
                claimed = board.claim(task, self.name, LEASE)
            except Refused as e:
                if e.code != "taken":
                    raise
                self.emit("taken", task=task)
                continue
            self.emit("win", task=task, fence=claimed.fence)
            board.release(task, claimed.token or "")

    def effects(self, keys: int) -> None:
        gate = self.kernel.sideeffect
        for i in range(keys):
            key = f"key-{i}"
            action = Action(key, f"res-{i}", RetrySafety.SAFE)
            for _ in range(MAX_TRIES):
                decision = gate.acquire(action, LEASE)
                if isinstance(decision, Granted):
                    lease = decision.lease

                    def body(down: Downstream, key: str = key) -> None:
                        down.put(f"effect/{key}", self.name)

                    gate.write_fenced(action.resource, lease.fence, body)
                    self.emit("body", key=key, fence=lease.fence)
                    if self.hold_ms:  # the effect takes time, as a real one does
                        time.sleep(self.hold_ms / 1000)
                    gate.complete(action, lease, self.name.encode())
                    break
                if isinstance(decision, Replayed):
                    self.emit("replayed", key=key)
                    break
                if isinstance(decision, (InFlight, Contended)):
                    self.emit("in-flight" if isinstance(decision, InFlight) else "contended", key=key)
                    time.sleep(random.uniform(0.001, 0.005))
                    continue
                raise RuntimeError(f"{key}: unexpected {decision}")
            else:
                raise RuntimeError(f"{key}: still busy after {MAX_TRIES} tries")

    def sink(self, index: int, sink_rounds: int) -> None:
        gate = self.kernel.sideeffect
        for s in range(sink_rounds):
            fence = s * 16 + index + 1

            def body(down: Downstream, fence: int = fence) -> None:
                count = int(down.get("ledger/count") or "0")
                down.put("ledger/count", str(count + 1))
                down.put(f"ledger/{count + 1:08d}", json.dumps({"worker": self.name, "fence": fence}))

            try:
                gate.write_fenced("ledger", fence, body)
            except Refused as e:
                if e.code != "fence-stale":
                    raise
                self.emit("sink-stale", fence=fence)
                continue
            self.emit("sink-ok", fence=fence)


def barrier(folder: str, phase: str, index: int, parties: int) -> None:
    """The protocol's phase line: announce ``PHASE-N`` in ``folder``, then
    wait until every party has (workers in different languages run at very
    different speeds)."""
    (Path(folder) / f"{phase}-{index}").touch()
    deadline = time.monotonic() + 120
    while sum(1 for f in Path(folder).iterdir() if f.name.startswith(f"{phase}-")) < parties:
        if time.monotonic() > deadline:
            raise RuntimeError(f"barrier {phase}: not every one of {parties} parties there after 120 s")
        time.sleep(0.002)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="xworker.py")
    p.add_argument("--store", required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--keys", type=int, required=True)
    p.add_argument("--sink-rounds", type=int, required=True)
    p.add_argument("--component")
    p.add_argument("--barrier", help="a folder: start together with --parties workers")
    p.add_argument("--parties", type=int)
    p.add_argument("--hold-ms", type=int, default=0, help="hold each effect this long before complete")
    a = p.parse_args(argv)
    if a.hold_ms < 0:
        p.error("--hold-ms takes a non-negative integer")
    if (a.barrier is None) != (a.parties is None):
        p.error("--barrier and --parties go together")
    try:
        with Kernel.open(a.store, component=a.component) as kernel:
            def line(phase: str) -> None:
                if a.barrier is not None:
                    barrier(a.barrier, phase, a.index, a.parties)

            kernel.taskboard.get("t0")  # compiled and instantiated
            line("ready")
            w = Worker(kernel, a.worker, a.hold_ms)
            w.claims(a.tasks, a.rounds)
            line("effects")
            w.effects(a.keys)
            line("sink")
            w.sink(a.index, a.sink_rounds)
    except (GakError, RuntimeError) as e:
        print(f"xworker {a.worker}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
