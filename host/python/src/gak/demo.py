"""``python -m gak demo``: the reference-runtime story of ``gak demo``
(``host/rust/cli/src/demo.rs``), end to end through the component, one numbered
line per event.

A run of three steps is started, dies after two, and resumes on another
worker: the plan skips the finished steps and every effect body's call
counter proves nothing was replayed. Then a claim race and an uncertain
effect being reconciled.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Optional, TextIO

from .clock import ManualClock, SystemClock
from .errors import GakError, Refused, StorageError
from .kernel import Kernel
from .runner import Applied, BodyFailed, Committer, Runner
from .stores import open_store
from .types import Action, Outcome, Replayed, Resolution, RetrySafety, Snapshot, Status, StepDef, TaskSeed, Uncertain

LEASE = 30_000


@dataclass
class DemoReport:
    """What the demo observed, for tests to check."""

    body_calls: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    race_winners: int = 0
    race_claimers: int = 0
    retry_refused: bool = False
    replayed_after_resolve: bool = False

    def broken(self) -> bool:
        replayed = any(n != 1 for step, n in self.body_calls.items() if step != "refund")
        return replayed or self.race_winners != 1 or not self.retry_refused or not self.replayed_after_resolve


STEPS = [
    StepDef("reserve-stock"),
    StepDef("charge-card", ("reserve-stock",)),
    StepDef("ship-parcel", ("charge-card",)),
]


class _Demo:
    def __init__(self, kernel: Kernel, clock: ManualClock, out: TextIO) -> None:
        self.kernel = kernel
        self.clock = clock
        self.out = out
        self.line = 0
        self.report = DemoReport()
        self.run_id = f"order-7-{clock.now():x}"

    def say(self, text: str) -> None:
        self.line += 1
        print(f"{self.line}. {text}", file=self.out, flush=True)

    def run_step(self, committer: Committer, fence: int, step: str) -> None:
        """Run ``step`` as a worker holding the run's claim with ``fence``:
        effect through the Runner, step outcome through the gate, snapshot."""
        runner = Runner(self.kernel, LEASE)
        action = Action(f"{self.run_id}/{step}", step, fingerprint=f"{step}:v1")

        def body(_lease: object) -> bytes:
            self.report.body_calls[step] = self.report.body_calls.get(step, 0) + 1
            return f"{step} ok".encode()

        ran = runner.run(action, body)
        if not isinstance(ran, (Applied, Replayed)):
            raise StorageError(f"{step}: unexpected {ran}")
        self.kernel.commitgate.commit(self.run_id, step, fence, Outcome(Status.SUCCEEDED, ran.result))
        committer.step_done(step)

    def story(self) -> None:
        board = self.kernel.taskboard
        board.seed([TaskSeed(self.run_id, title="order #7")])
        self.say(
            f"run {self.run_id} created: reserve-stock -> charge-card -> ship-parcel (each depends on the one before)"
        )

        # Worker A claims the run and gets through two steps.
        claim_a = board.claim(self.run_id, "worker-a", LEASE)
        committer_a = Committer.resume(self.kernel, self.run_id, claim_a.fence)
        plan = self.kernel.checkpoint.build_plan(STEPS)
        for step in plan.run[:2]:
            self.run_step(committer_a, claim_a.fence, step)
        self.say(
            f"worker-a (fence {claim_a.fence}) ran reserve-stock and charge-card: 2 snapshots saved "
            f"(seq {committer_a.snapshot.seq}), 2 step outcomes committed"
        )

        # Worker A dies: no release, no further snapshot.
        del committer_a
        self.say("worker-a died before ship-parcel started (its claim is never released)")

        # Worker B takes the run over once A's claim expires, and resumes.
        try:
            board.claim(self.run_id, "worker-b", LEASE)
            raise StorageError("expected taken, got a claim")
        except Refused as e:
            if e.code != "taken":
                raise
        self.clock.advance(LEASE)
        claim_b = board.claim(self.run_id, "worker-b", LEASE)
        committer_b = Committer.resume(self.kernel, self.run_id, claim_b.fence)
        plan = self.kernel.checkpoint.build_plan(STEPS, committer_b.snapshot)
        for step in plan.run:
            self.run_step(committer_b, claim_b.fence, step)
        # The zombie: A wakes up and tries to write the run again.
        s = committer_b.snapshot
        zombie = Snapshot(s.run_id, s.seq + 1, s.status, list(s.done), dict(s.fields), fence=claim_a.fence)
        zombie_refused: Optional[str] = None
        try:
            self.kernel.checkpoint.save_if_newer(zombie)
        except Refused as e:
            zombie_refused = e.code
        self.kernel.commitgate.commit(self.run_id, None, claim_b.fence, Outcome(Status.SUCCEEDED, b"shipped"))
        board.complete(self.run_id, claim_b.token or "")
        calls = " ".join(f"{k}={v}" for k, v in sorted(self.report.body_calls.items()))
        self.report.skipped = list(plan.skip)
        self.report.resumed = list(plan.run)
        self.say(
            f"worker-b took over (fence {claim_b.fence}): plan skipped [{', '.join(plan.skip)}], ran only "
            f"[{', '.join(plan.run)}]; body calls {calls} — nothing replayed; zombie worker-a's save refused: "
            f"{zombie_refused or 'no (BUG)'}"
        )
        self.race()
        self.reconcile()

    def race(self) -> None:
        task = f"{self.run_id}-race"
        self.kernel.taskboard.seed([TaskSeed(task)])
        claimers = 8
        gate = threading.Barrier(claimers)
        results: list[object] = []
        lock = threading.Lock()

        def claim(i: int) -> None:
            gate.wait()
            try:
                r: object = self.kernel.taskboard.claim(task, f"racer-{i}", LEASE)
            except GakError as e:
                r = e
            with lock:
                results.append(r)

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(claimers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [r for r in results if not isinstance(r, GakError)]
        taken = sum(1 for r in results if isinstance(r, Refused) and r.code == "taken")
        self.report.race_winners = len(winners)
        self.report.race_claimers = claimers
        winner = getattr(winners[0], "owner", "nobody") if winners else "nobody"
        self.say(
            f"{claimers} workers raced to claim one open task: {len(winners)} winner ({winner}), "
            f"{taken} refused as taken"
        )

    def reconcile(self) -> None:
        runner = Runner(self.kernel, LEASE)
        action = Action(f"{self.run_id}/refund", "payments", RetrySafety.UNSAFE)
        calls = 0

        def failing(_lease: object) -> bytes:
            nonlocal calls
            calls += 1
            raise ConnectionResetError("connection reset after sending")

        def twice(_lease: object) -> bytes:
            nonlocal calls
            calls += 1
            return b"refund twice"

        first_uncertain = False
        try:
            runner.run(action, failing)
        except BodyFailed as e:
            first_uncertain = isinstance(e.__cause__, ConnectionResetError)
        second = runner.run(action, twice)
        self.report.retry_refused = first_uncertain and isinstance(second, Uncertain)
        gate = self.kernel.sideeffect
        claim = gate.begin_reconcile(action, LEASE)
        # The reconciler asks the payment provider by idempotency key: it did happen.
        gate.resolve_uncertain(action, Resolution(True, b"refund r-81 settled", claim=claim.claim))
        third = runner.run(action, twice)
        self.report.replayed_after_resolve = isinstance(third, Replayed) and third.result == b"refund r-81 settled"
        self.report.body_calls["refund"] = calls
        after = gate.acquire(action, LEASE)
        shown = after.result.decode() if isinstance(after, Replayed) else repr(after)
        self.say(
            f"refund body failed -> uncertain; retry refused without calling the body "
            f"({'yes' if self.report.retry_refused else 'NO'}); a reconciler claimed it (until "
            f"+{claim.until - self.clock.now()} ms) and resolved it applied; the key now only replays "
            f"({shown}); refund body calls = {calls}"
        )


def run(kernel: Kernel, clock: ManualClock, out: TextIO = sys.stdout) -> DemoReport:
    """Run the demo on ``kernel`` (whose clock must be ``clock``)."""
    demo = _Demo(kernel, clock, out)
    demo.story()
    return demo.report


def main(url: str, component: Optional[str] = None) -> int:
    """The ``demo`` command: 0 when every promise held."""
    if "clock=db" in url or "clock=database" in url:
        print(
            "gak: the demo lets a dead worker's lease expire by moving its own clock; run it without clock=db",
            file=sys.stderr,
        )
        return 2
    # The demo moves time by hand (to let a dead worker's lease expire
    # without waiting), starting from the wall clock.
    clock = ManualClock(SystemClock().now())
    backend = open_store(url)
    print(f"gak demo on {backend.describe()}")
    with Kernel(backend, clock=clock, component=component) as kernel:
        report = run(kernel, clock)
    if report.broken():
        print(f"gak: the demo observed a broken promise: {report}", file=sys.stderr)
        return 1
    return 0
