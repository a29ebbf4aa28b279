"""Replaying the host-protocol cases (``tests/host-protocol``, described in
its README): what this host does around the component — the transaction's
life, conflict re-runs, ambiguous commits, sink bodies, re-entrant calls,
oversized payloads, store URLs, the runner — judged by the same data every
host's suite replays.

Call steps reuse the vectors' machinery (:mod:`.vectors`: substitution,
matching, ``bind``) with the cases' additions: ``faults`` and ``tx`` (on the
scripted store, :mod:`.scripted`), ``inner``, ``$repeat`` and the sink
``body`` kinds; ``run`` steps drive :class:`gak.Runner`; ``work`` steps
drive :class:`gak.Worker` (``workers.json``).
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..clock import Clock, ManualClock, SystemClock
from ..component import _repo_root
from ..errors import GakError, OpenError, Refused, StorageError
from ..kernel import Downstream, Kernel
from ..runner import Applied, BodyFailed, NotApplied, Runner
from ..types import Contended, InFlight, Replayed, Uncertain
from ..worker import Backoff, Worker
from . import calls
from ._calls import action_arg
from .scripted import BadFault, ScriptedBackend
from . import values
from .vectors import Malformed, _call_step, _step, matches, substitute

#: Every store a case may name; this host has a binding for each.
STORES = ("scripted", "sqlite", "postgres")
#: Bound on anything that could hang: a re-entrant call, a heartbeat wait.
HANG = 10.0


class CaseFailed(AssertionError):
    """The host answered a case differently (the message says where and how)."""


class CaseSkipped(Exception):
    """A case this host cannot play for a reason of its language (the
    message says which): reported skipped, never passed."""


#: Worker handler scripts this host cannot play, and why.
UNPLAYABLE = {"panic": "Python has no panics: a handler's failure is an exception, which the throw cases cover"}


@dataclass
class Case:
    """One case of one file: a scenario (``steps``) or a store URL (``url``)."""

    file: str
    name: str
    rule: str
    body: dict[str, Any]
    stores: list[str] = field(default_factory=list)

    @property
    def is_url(self) -> bool:
        return "url" in self.body


def cases_dir() -> Path:
    """The repository's ``tests/host-protocol``."""
    for start in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        root = _repo_root(start)
        if root is not None and (root / "tests" / "host-protocol").is_dir():
            return root / "tests" / "host-protocol"
    raise OpenError("cannot find tests/host-protocol of the gak repository")


def load(directory: Optional[Path] = None) -> list[Case]:
    """Every case of every ``*.json`` file, in file order."""
    out: list[Case] = []
    for path in sorted((directory or cases_dir()).glob("*.json")):
        items = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(items, list):
            raise Malformed(f"{path.name}: expected an array of cases")
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("case"), str):
                raise Malformed(f"{path.name}: $[{i}] is not a case with a name")
            stores = [] if "url" in item else item.get("stores", ["scripted"])
            if not isinstance(stores, list) or not all(s in STORES for s in stores):
                raise Malformed(f"{path.name}: {item['case']}: stores {stores!r}")
            out.append(Case(path.name, item["case"], str(item.get("rule", "")), item, list(stores)))
    return out


# --- arguments ---------------------------------------------------------------


def expand_repeats(v: Any) -> Any:
    """``{"$repeat": S, "times": N}`` → S repeated N times (before ``$name``
    substitution; a result starting with ``$`` is escaped as ``$$``)."""
    if isinstance(v, list):
        return [expand_repeats(i) for i in v]
    if isinstance(v, dict):
        if "$repeat" in v:
            s, n = v["$repeat"], v.get("times")
            if not isinstance(s, str) or type(n) is not int or n < 0 or set(v) != {"$repeat", "times"}:
                raise Malformed(f"$repeat: expected a string and a count, got {v!r}")
            out = s * n
            return "$" + out if out.startswith("$") else out
        return {k: expand_repeats(x) for k, x in v.items()}
    return v


# --- sink bodies -------------------------------------------------------------


def _sink_body(kernel: Kernel, a: Any, inner: list[str]) -> Callable[[Downstream], None]:
    resource = values.string(values.field(a, "resource"), "resource")
    fail = values.boolean(values.field(a, "fail"), "fail")
    kind = a.get("body", "append") if isinstance(a, dict) else "append"

    def append(down: Downstream) -> None:
        # The vectors' reference body: append "m" to the resource's marker.
        marker = down.get(resource) or ""
        down.put(resource, marker + "m")
        if fail:
            raise RuntimeError("the reference body was asked to fail")

    def swallow(down: Downstream) -> None:
        # "Insert if absent": every store error is caught and ignored.
        try:
            marker = down.get(resource) or ""
        except Exception:  # noqa: BLE001 - the point of this body
            marker = ""
        try:
            down.put(resource, marker + "m")
        except Exception:  # noqa: BLE001
            pass
        if fail:
            raise RuntimeError("the reference body was asked to fail")

    def reenter(down: Downstream) -> None:
        try:
            kernel.sideeffect.sink_seen(resource)
            inner.append("ok")
        except (Refused, StorageError) as e:
            inner.append(e.code)
        append(down)

    def raw(statement: str, catch: bool) -> Callable[[Downstream], None]:
        def body(down: Downstream) -> None:
            append(down)
            if down.raw is None:
                raise Malformed(f"body {kind}: this store lends no driver handle")
            try:
                down.raw.execute(statement)
            except Exception:  # noqa: BLE001 - the driver's error, whatever its type
                if not catch:
                    raise

        return body

    bodies: dict[str, Callable[[Downstream], None]] = {
        "append": append,
        "swallow": swallow,
        "reenter": reenter,
        "raw-commit": raw("COMMIT", catch=False),
        "raw-rollback": raw("ROLLBACK", catch=False),
        "raw-error": raw("SELECT * FROM gak_no_such_table", catch=True),
    }
    if kind not in bodies:
        raise Malformed(f"unknown sink body {kind!r}")
    return bodies[kind]


def _write_fenced(inner: list[str]) -> calls.Call:
    def call(kernel: Kernel, a: Any) -> None:
        fence = values.u64(values.require(values.field(a, "fence"), "fence"), "fence")
        resource = values.string(values.field(a, "resource"), "resource")
        kernel.sideeffect.write_fenced(resource, fence, _sink_body(kernel, a, inner))

    return call


# --- steps -------------------------------------------------------------------


def _bounded(what: str, f: Callable[[], Any]) -> Any:
    """Run ``f`` in a thread; a host that hangs fails the case instead of
    the suite."""
    box: list[Any] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            box.append(f())
        except BaseException as e:  # noqa: BLE001 - re-raised below
            err.append(e)

    t = threading.Thread(target=run, name=f"gak-case {what}", daemon=True)
    t.start()
    t.join(HANG)
    if t.is_alive():
        raise Malformed(f"{what}: no answer within {HANG:g} s (the host hangs)")
    if err:
        raise err[0]
    return box[0] if box else None


def _call(kernel: Kernel, backend: Any, store: str, step: dict[str, Any], binds: dict[str, Any]) -> None:
    name = step.get("call")
    faults = step.get("faults", [])
    scripted = isinstance(backend, ScriptedBackend)
    if faults and not scripted:
        raise Malformed(f"{name}: faults need the scripted store, not {store}")
    if scripted:
        try:
            backend.script.arm(faults)
        except BadFault as e:
            raise Malformed(f"{name}: faults: {e}") from None
    inner: list[str] = []
    overrides = {"sink.write-fenced": _write_fenced(inner)}
    counts: dict[str, int] = {}

    def dispatch(k: Any, n: str, a: Any) -> tuple[bool, Any]:
        try:
            return calls.dispatch(k, n, a, overrides)
        finally:
            if scripted:
                counts.update(backend.script.counts())

    expanded = dict(step, args=expand_repeats(step.get("args")))
    _bounded(str(name), lambda: _call_step(kernel, dispatch, expanded, binds))
    if "tx" in step and scripted:
        want = step["tx"]
        if counts != want:
            raise Malformed(f"{name}: expected transactions {json.dumps(want)}, the host made {json.dumps(counts)}")
    if "inner" in step:
        got = inner[0] if inner else None
        if got != step["inner"]:
            raise Malformed(f"{name}: the body's re-entrant call answered {got!r}, expected {step['inner']!r}")


def _outcome(ran: Any) -> tuple[str, Optional[str]]:
    if isinstance(ran, Applied):
        return "applied", ran.result.decode("utf-8", "replace")
    if isinstance(ran, Replayed):
        return "replayed", ran.result.decode("utf-8", "replace")
    if isinstance(ran, Uncertain):
        return "uncertain", None
    if isinstance(ran, InFlight):
        return "in-flight", None
    if isinstance(ran, Contended):
        return "contended", None
    raise Malformed(f"the runner returned {ran!r}")


def _run(kernel: Kernel, clock: Clock, step: dict[str, Any], binds: dict[str, Any]) -> None:
    spec = step["run"]
    if not isinstance(spec, dict):
        raise Malformed("run: expected an object")
    action = action_arg(values.field(spec, "action"), "action")
    ttl = values.u64(values.require(values.field(spec, "ttl"), "ttl"), "ttl")
    kind = spec.get("body")
    result = values.data(values.field(spec, "result"), "result")
    called = 0
    trouble: list[str] = []  # what went wrong inside the body, reported first

    def wait(hb: Any, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + HANG
        while not done():
            if not hb.wait_changed(max(deadline - time.monotonic(), 0)):
                trouble.append(f"the heartbeat never reported {what} within {HANG:g} s")
                raise RuntimeError(trouble[-1])

    def body(lease: Any, hb: Any) -> bytes:
        nonlocal called
        called += 1
        if kind == "return":
            return result
        if kind == "fail":
            raise RuntimeError("the case's body fails on purpose")
        if kind == "not-applied":
            raise NotApplied("the case's body surely did not apply it")
        if kind == "outlive":
            wait(hb, lambda: hb.renewals >= 3 or hb.lost is not None, "3 renewals")
            if hb.lost is not None:
                trouble.append(f"a renewal was refused: {hb.lost}")
                raise RuntimeError(trouble[-1])
            for j, inside in enumerate(spec.get("inside", [])):
                try:
                    _step(kernel, clock, calls.dispatch, inside, binds)
                except Malformed as e:
                    trouble.append(f"inside[{j}]: {e}")
                    raise
            return result
        if kind == "lose":
            kernel.sideeffect.mark_uncertain(action, hb.lease, "lost on purpose")
            wait(hb, lambda: hb.lost is not None, "the lease lost")
            raise RuntimeError("the lease was lost")
        trouble.append(f"unknown run body {kind!r}")
        raise RuntimeError(trouble[-1])

    try:
        got, value = _outcome(Runner(kernel, ttl).run_with_heartbeat(action, body))
    except BodyFailed:
        got, value = "body-failed", None
    except NotApplied:
        got, value = "not-applied", None
    except GakError as e:
        got, value = f"error {e}", None
    if trouble:
        raise Malformed(f"run {action.key}: {trouble[0]}")
    want = step.get("outcome")
    if got != want:
        raise Malformed(f"run {action.key}: expected {want}, got {got}")
    if "value" in step and value != step["value"]:
        raise Malformed(f"run {action.key}: expected value {step['value']!r}, got {value!r}")
    if "calls" in step and called != step["calls"]:
        raise Malformed(f"run {action.key}: the body was called {called} times, expected {step['calls']}")


class _Worked(Exception):
    """A worker handler met something the case did not expect."""


def _work(kernel: Kernel, clock: Clock, step: dict[str, Any], binds: dict[str, Any]) -> None:
    """A ``work`` step: the worker run until idle with scripted handlers
    (``tests/host-protocol/README.md``, "Worker cases")."""
    work = substitute(step["work"], binds)
    if not isinstance(work, dict):
        raise Malformed("work: expected an object")

    def num(key: str, default: Optional[int]) -> Optional[int]:
        v = work.get(key, default)
        if v is not None and (type(v) is not int or v < 0):
            raise Malformed(f"work.{key}: expected a count, got {v!r}")
        return v

    ttl = num("ttl", 30_000)
    assert ttl is not None
    backoff = None
    if "backoff" in work:
        b = work["backoff"]
        if not isinstance(b, dict) or type(b.get("base")) is not int or type(b.get("max")) is not int:
            raise Malformed(f"work.backoff: expected {{base, max, jitter}}, got {b!r}")
        jitter = b.get("jitter", 0)
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)):
            raise Malformed(f"work.backoff.jitter: {jitter!r}")
        backoff = Backoff(b["base"], b["max"], float(jitter))
    handlers = work.get("handlers") or {}
    default = work.get("default", "ok")
    if not isinstance(handlers, dict) or not isinstance(default, str):
        raise Malformed("work.handlers / work.default: expected scripts by id / a script")
    worker = Worker(
        kernel,
        work.get("agent", "w"),
        batch=num("batch", 10),  # type: ignore[arg-type]
        ttl=ttl,
        concurrency=num("concurrency", None),
        idle=0.01,
        backoff=backoff,
    )
    order: list[str] = []
    trouble: list[str] = []
    lock = threading.Lock()

    def handler(task: Any) -> None:
        with lock:
            order.append(task.id)
        script = handlers.get(task.id, default)
        if script == "ok":
            return
        if script == "throw":
            raise RuntimeError("boom")
        if script == "throw-long":
            raise RuntimeError("é" * 3000)
        if script == "throw-nul":
            raise RuntimeError("a\0b")
        if script == "stop":
            worker.stop()
            return
        if script == "lose":
            # The claim expires and another worker takes it over.
            if isinstance(clock, ManualClock):
                clock.advance(ttl)
            else:
                trouble.append("lose needs the manual clock")
            try:
                kernel.taskboard.claim(task.id, "thief", ttl)
            except GakError as e:
                trouble.append(f"the thief's claim: {e}")
            return
        if script == "outlive":
            # Real time past the ttl: the worker's renewals keep the claim
            # live, so a thief is refused.
            time.sleep(ttl * 3 / 1000)
            try:
                kernel.taskboard.claim(task.id, "thief", ttl)
                trouble.append("the thief's claim succeeded; expected taken")
            except GakError as e:
                if e.code != "taken":
                    trouble.append(f"the thief's claim answered {e}; expected taken")
            return
        trouble.append(f"unknown handler {script!r}")
        raise _Worked(trouble[-1])

    try:
        worked = _bounded("work", lambda: worker.run_until_idle(handler))
    except GakError as e:
        raise Malformed(f"work: the worker failed: {e}") from None
    if trouble:
        raise Malformed(f"work: {trouble[0]}")
    got = {
        "claimed": worked.claimed,
        "completed": worked.completed,
        "failed": worked.failed,
        "released": worked.released,
        "lost": worked.lost,
    }
    if "worked" in step and not matches(step["worked"], True, got, binds):
        raise Malformed(f"work: expected {json.dumps(step['worked'])}, got {json.dumps(got)}")
    if "order" in step and step["order"] != order:
        raise Malformed(f"work: expected the handlers in order {json.dumps(step['order'])}, got {json.dumps(order)}")


def unplayable(case: Case) -> Optional[str]:
    """Why this host cannot play ``case`` (a worker handler script its
    language has no counterpart of), or ``None``."""
    for step in case.body.get("steps") or []:
        work = step.get("work") if isinstance(step, dict) else None
        if not isinstance(work, dict):
            continue
        scripts = [work.get("default", "ok")]
        if isinstance(work.get("handlers"), dict):
            scripts += list(work["handlers"].values())
        for script in scripts:
            if script in UNPLAYABLE:
                return f"{case.name}: handler {script!r}: {UNPLAYABLE[script]}"
    return None


def run_case(case: Case, store: str, fresh: Callable[[Clock], tuple[Kernel, Any]]) -> None:
    """Replay ``case`` on a fresh kernel from ``fresh(clock)`` (which also
    returns the backend, to arm a scripted one). Raises :class:`CaseFailed`,
    or :class:`CaseSkipped` for a case this host cannot play."""
    if case.is_url:
        return run_url_case(case)
    why = unplayable(case)
    if why is not None:
        raise CaseSkipped(why)
    steps = case.body.get("steps")
    if not isinstance(steps, list):
        raise CaseFailed(f"{case.name}: steps: expected an array")
    system = case.body.get("clock") == "system"
    clock: Clock = SystemClock() if system else ManualClock(0)
    kernel, backend = fresh(clock)
    binds: dict[str, Any] = {}
    try:
        for i, step in enumerate(steps):
            at = f"{case.file}: {case.name} [{store}] step {i}"
            try:
                if not isinstance(step, dict):
                    raise Malformed("expected an object")
                if "run" in step:
                    _run(kernel, clock, step, binds)
                elif "work" in step:
                    _work(kernel, clock, step, binds)
                elif "call" in step:
                    _call(kernel, backend, store, step, binds)
                elif system:
                    raise Malformed("clock steps need the manual clock")
                else:
                    _step(kernel, clock, calls.dispatch, step, binds)
            except Malformed as e:
                raise CaseFailed(f"{at}: {e}") from None
    finally:
        kernel.close()


def run_url_case(case: Case) -> None:
    """Opening a kernel on ``url`` fails, and no part of the failure shows
    ``secret``."""
    url, secret = case.body["url"], case.body.get("secret")
    try:
        kernel = Kernel.open(url)
    except GakError as e:
        shown = "".join(traceback.format_exception(e))
        if secret and secret in shown:
            raise CaseFailed(f"{case.name}: the error shows the password: {shown}") from None
        return
    kernel.close()
    raise CaseFailed(f"{case.name}: opening {url!r} succeeded; expected an error")


def fresh_scripted(clock: Clock) -> tuple[Kernel, Any]:
    """A kernel on a new scripted store."""
    backend = ScriptedBackend()
    return Kernel(backend, clock=clock), backend
