"""Vector calls → typed kernel calls, and answers → the vectors' JSON, exactly
as the Rust runner maps them (``host/rust/cli/src/conformance/calls.rs``)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..errors import Refused, StorageError
from ..kernel import Kernel
from ..types import (
    Action,
    Contended,
    Granted,
    InFlight,
    KeyInfo,
    Lease,
    Outcome,
    Replayed,
    Resolution,
    Snapshot,
    StepDef,
    Task,
    TaskSeed,
    Uncertain,
)
from .vectors import Malformed


class Invalid(Exception):
    """A value no caller should send (unknown enum string, number out of
    range): the call's answer is ``invalid-input``."""


def _field(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


def _show(v: Any) -> str:
    import json

    return json.dumps(v)


def _string(obj: Any, key: str) -> str:
    v = _field(obj, key)
    if v is None:
        raise Malformed(f"missing {key}")
    if not isinstance(v, str):
        raise Malformed(f"{key}: expected a string, got {_show(v)}")
    return v


def _string_or_empty(obj: Any, key: str) -> str:
    """Lenient: absent is empty (the kernel then judges it)."""
    return "" if _field(obj, key) is None else _string(obj, key)


def _opt_string(obj: Any, key: str) -> Optional[str]:
    return None if _field(obj, key) is None else _string(obj, key)


def _number(obj: Any, key: str) -> int:
    v = _field(obj, key)
    if v is None:
        raise Malformed(f"missing {key}")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Malformed(f"{key}: expected a number, got {_show(v)}")
    if not isinstance(v, int) or not 0 <= v < 1 << 64:
        raise Invalid(f"{key}: {v} is not a u64")
    return v


def _opt_number(obj: Any, key: str) -> Optional[int]:
    return None if _field(obj, key) is None else _number(obj, key)


def _boolean(obj: Any, key: str) -> bool:
    v = _field(obj, key)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise Malformed(f"{key}: expected a bool, got {_show(v)}")
    return v


def _strings(obj: Any, key: str) -> list[str]:
    v = _field(obj, key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise Malformed(f"{key}: expected an array, got {_show(v)}")
    if not all(isinstance(i, str) for i in v):
        raise Malformed(f"{key}: expected strings")
    return list(v)


def _bytes(obj: Any, key: str) -> bytes:
    return _string_or_empty(obj, key).encode("utf-8", "surrogatepass")


def _object(obj: Any, key: str) -> dict[str, Any]:
    v = _field(obj, key)
    if v is None:
        raise Malformed(f"missing {key}")
    if not isinstance(v, dict):
        raise Malformed(f"{key}: expected an object, got {_show(v)}")
    return v


def _enum(obj: Any, key: str, allowed: tuple[str, ...], what: str) -> Optional[str]:
    v = _opt_string(obj, key)
    if v is not None and v not in allowed:
        raise Invalid(f"unknown {what} {v!r}")
    return v


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _snapshot(v: Any) -> Snapshot:
    raw = _field(v, "fields")
    fields: dict[str, str] = {}
    if raw is not None:
        if not isinstance(raw, dict):
            raise Malformed(f"fields: expected an object, got {_show(raw)}")
        for k, x in raw.items():
            if not isinstance(x, str):
                raise Malformed(f"fields.{k}: expected a string, got {_show(x)}")
            fields[k] = x
    return Snapshot(
        run_id=_string_or_empty(v, "run-id"),
        seq=_opt_number(v, "seq") or 0,
        fence=_opt_number(v, "fence"),
        status=_string_or_empty(v, "status"),
        done=_strings(v, "done"),
        fields=fields,
    )


def _snapshot_json(s: Snapshot) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run-id": s.run_id,
        "seq": s.seq,
        "status": s.status,
        "done": s.done,
        "fields": dict(sorted(s.fields.items())),
    }
    if s.fence is not None:
        out["fence"] = s.fence
    return out


def _outcome_json(o: Outcome) -> dict[str, Any]:
    return {"status": o.status.value, "result": _text(o.result)}


def _action(v: Any) -> Action:
    a = _object(v, "action")
    safety = _enum(a, "retry-safety", ("safe", "unsafe"), "retry-safety") or "safe"
    return Action(
        key=_string_or_empty(a, "key"),
        resource=_string_or_empty(a, "resource"),
        retry_safety=safety,  # type: ignore[arg-type]
        fingerprint=_opt_string(a, "fingerprint"),
    )


def _lease(v: Any) -> Lease:
    lease = _object(v, "lease")
    return Lease(
        key=_string_or_empty(lease, "key"),
        resource=_string_or_empty(lease, "resource"),
        fence=_opt_number(lease, "fence") or 0,
        holder=_string_or_empty(lease, "holder"),
        until=_opt_number(lease, "until") or 0,
    )


def _lease_json(lease: Lease) -> dict[str, Any]:
    return {
        "key": lease.key,
        "resource": lease.resource,
        "fence": lease.fence,
        "holder": lease.holder,
        "until": lease.until,
    }


_TASK_STATES = ("open", "claimed", "done", "failed")
_KEY_STATES = ("cleared", "in-flight", "uncertain", "completed")


def _task_json(t: Task) -> dict[str, Any]:
    out: dict[str, Any] = {"id": t.id, "title": t.title, "deps": t.deps, "state": t.state.value, "fence": t.fence}
    if t.owner is not None:
        out["owner"] = t.owner
    if t.token is not None:
        out["token"] = t.token
    if t.until is not None:
        out["until"] = t.until
    return out


def _key_info_json(i: KeyInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": i.key,
        "state": i.state.value,
        "retry-safety": i.retry_safety.value,
        "resource": i.resource,
    }
    for name, value in (
        ("until", i.until),
        ("completed-at", i.completed_at),
        ("reconciling-until", i.reconciling_until),
        ("fingerprint", i.fingerprint),
        ("reason", i.reason),
    ):
        if value is not None:
            out[name] = value
    return out


def _limit(v: Any) -> int:
    n = _number(v, "limit")
    if n >= 1 << 32:
        raise Invalid(f"limit: {n} is out of range")
    return n


def _page(items: list[Any], nxt: Optional[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"items": items}
    if nxt is not None:
        out["next"] = nxt
    return out


def _acquired_json(x: Any) -> Any:
    if isinstance(x, Granted):
        return {"granted": _lease_json(x.lease)}
    if isinstance(x, Replayed):
        return {"replayed": _text(x.result)}
    if isinstance(x, Uncertain):
        return {"uncertain": x.reason}
    if isinstance(x, InFlight):
        return {"in-flight": {}}
    assert isinstance(x, Contended)
    return {"contended": {"until": x.until}}


def _write_fenced(k: Kernel, a: Any) -> None:
    resource = _string_or_empty(a, "resource")
    fail = _boolean(a, "fail")
    fence = _number(a, "fence")

    def body(down: Any) -> None:
        # The reference body: append "m" to the resource's marker, then fail
        # if asked to — the append must then vanish with the rest.
        marker = down.get(resource) or ""
        down.put(resource, marker + "m")
        if fail:
            raise RuntimeError("the reference body was asked to fail")

    k.sideeffect.write_fenced(resource, fence, body)


def _sink_read(k: Kernel, a: Any) -> dict[str, Any]:
    resource = _string_or_empty(a, "resource")
    seen = k.sideeffect.sink_seen(resource)
    marker = k.with_downstream(lambda down: down.get(resource))
    return {"seen-fence": seen, "marker": marker or ""}


def _list_all(k: Kernel, a: Any) -> list[Any]:
    """``taskboard.list`` without ``limit``: the 0.1 form, the whole board."""
    state = _enum(a, "state", _TASK_STATES, "state")
    out: list[Any] = []
    after: Optional[str] = None
    while True:
        page = k.taskboard.list(state, after, 1000)
        out.extend(_task_json(t) for t in page.items)
        after = page.next
        if after is None:
            return out


def _seed(k: Kernel, a: Any) -> None:
    raw = _field(a, "tasks")
    if raw is not None and not isinstance(raw, list):
        raise Malformed(f"tasks: got {_show(raw)}")
    tasks = [
        TaskSeed(
            id=_string_or_empty(t, "id"),
            title=_opt_string(t, "title"),
            deps=tuple(_strings(t, "deps")),
            state=_enum(t, "state", _TASK_STATES, "state"),  # type: ignore[arg-type]
        )
        for t in raw or []
    ]
    k.taskboard.seed(tasks)


def _steps(a: Any) -> list[StepDef]:
    raw = _field(a, "steps")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Malformed(f"steps: got {_show(raw)}")
    return [StepDef(_string_or_empty(s, "id"), tuple(_strings(s, "depends-on"))) for s in raw]


def _resolution(a: Any) -> Resolution:
    r = _object(a, "resolution")
    return Resolution(
        applied=_boolean(r, "applied"),
        result=None if _field(r, "result") is None else _bytes(r, "result"),
        force_retryable=_boolean(r, "force-retryable"),
        claim=_opt_string(r, "claim"),
    )


def _plan_json(p: Any) -> dict[str, Any]:
    return {"skip": p.skip, "run": p.run, "untrusted": p.untrusted}


_CALLS: dict[str, Callable[[Kernel, Any], Any]] = {
    "checkpoint.save-if-newer": lambda k, a: k.checkpoint.save_if_newer(_snapshot(_object(a, "snapshot"))),
    "checkpoint.load": lambda k, a: _snapshot_json(k.checkpoint.load(_string_or_empty(a, "run-id"))),
    "checkpoint.build-plan": lambda k, a: _plan_json(
        k.checkpoint.build_plan(
            _steps(a), None if _field(a, "snapshot") is None else _snapshot(_field(a, "snapshot"))
        )
    ),
    "commitgate.commit": lambda k, a: _outcome_json(
        k.commitgate.commit(
            _string_or_empty(a, "run-id"),
            _opt_string(a, "step"),
            _opt_number(a, "fence") or 0,
            Outcome(
                _enum(_object(a, "outcome"), "status", ("succeeded", "failed"), "status")  # type: ignore[arg-type]
                or _string(_object(a, "outcome"), "status"),
                _bytes(_object(a, "outcome"), "result"),
            ),
        )
    ),
    "commitgate.read": lambda k, a: _outcome_json(
        k.commitgate.read(_string_or_empty(a, "run-id"), _opt_string(a, "step"))
    ),
    "sideeffect.acquire": lambda k, a: _acquired_json(k.sideeffect.acquire(_action(a), _number(a, "ttl"))),
    "sideeffect.complete": lambda k, a: _text(k.sideeffect.complete(_action(a), _lease(a), _bytes(a, "result"))),
    "sideeffect.release": lambda k, a: k.sideeffect.release(_action(a), _lease(a)),
    "sideeffect.abandon": lambda k, a: k.sideeffect.abandon(_action(a), _lease(a), _string_or_empty(a, "reason")),
    "sideeffect.renew": lambda k, a: _lease_json(k.sideeffect.renew(_action(a), _lease(a), _number(a, "ttl"))),
    "sideeffect.mark-uncertain": lambda k, a: k.sideeffect.mark_uncertain(
        _action(a), _lease(a), _string_or_empty(a, "reason")
    ),
    "sideeffect.begin-reconcile": lambda k, a: (
        lambda c: {"claim": c.claim, "until": c.until}
    )(k.sideeffect.begin_reconcile(_action(a), _number(a, "ttl"))),
    "sideeffect.resolve-uncertain": lambda k, a: (
        lambda r: {"replayed": _text(r.result)} if isinstance(r, Replayed) else {"cleared": {}}
    )(k.sideeffect.resolve_uncertain(_action(a), _resolution(a))),
    "sideeffect.list": lambda k, a: (
        lambda p: _page([_key_info_json(i) for i in p.items], p.next)
    )(k.sideeffect.list(_enum(a, "state", _KEY_STATES, "key state"), _opt_string(a, "after"), _limit(a))),
    "sideeffect.get": lambda k, a: _key_info_json(k.sideeffect.get(_string_or_empty(a, "key"))),
    "sink.write-fenced": _write_fenced,
    "sink.read": _sink_read,
    "taskboard.seed": _seed,
    "taskboard.list": lambda k, a: (
        _list_all(k, a)
        if _field(a, "limit") is None
        else (lambda p: _page([_task_json(t) for t in p.items], p.next))(
            k.taskboard.list(_enum(a, "state", _TASK_STATES, "state"), _opt_string(a, "after"), _limit(a))
        )
    ),
    "taskboard.get": lambda k, a: _task_json(k.taskboard.get(_string_or_empty(a, "id"))),
    "taskboard.claim-next": lambda k, a: (lambda t: None if t is None else _task_json(t))(
        k.taskboard.claim_next(_string_or_empty(a, "agent"), _number(a, "ttl"))
    ),
    "taskboard.claim": lambda k, a: _task_json(
        k.taskboard.claim(_string_or_empty(a, "id"), _string_or_empty(a, "agent"), _number(a, "ttl"))
    ),
    "taskboard.release": lambda k, a: k.taskboard.release(_string_or_empty(a, "id"), _string_or_empty(a, "token")),
    "taskboard.complete": lambda k, a: k.taskboard.complete(_string_or_empty(a, "id"), _string_or_empty(a, "token")),
    "taskboard.renew": lambda k, a: _task_json(
        k.taskboard.renew(_string_or_empty(a, "id"), _string_or_empty(a, "token"), _number(a, "ttl"))
    ),
    "retention.prune": lambda k, a: (
        lambda p: {
            "removed-keys": p.removed_keys,
            "removed-tasks": p.removed_tasks,
            "removed-runs": p.removed_runs,
            "more": p.more,
        }
    )(k.retention.prune(_number(a, "before"), _limit(a))),
}


#: A vector call's implementation: the kernel and the step's arguments.
Call = Callable[[Kernel, Any], Any]


def dispatch(
    kernel: Kernel, name: str, args: Any, overrides: Optional[dict[str, Call]] = None
) -> tuple[bool, Any]:
    """Run one vector call: ``(True, json)`` or ``(False, (code, detail))``.
    A malformed step raises :class:`Malformed`. ``overrides`` replaces the
    implementation of some calls (the host-protocol cases' sink bodies)."""
    call = (overrides or {}).get(name) or _CALLS.get(name)
    if call is None:
        raise Malformed(f"{name}: bad args: unknown call {name!r}")
    try:
        return True, call(kernel, {} if args is None else args)
    except Invalid as e:
        return False, ("invalid-input", str(e))
    except Refused as e:
        return False, (e.code, e.detail)
    except StorageError as e:
        return False, ("storage", e.detail)
    except Malformed as e:
        raise Malformed(f"{name}: bad args: {e}") from None
