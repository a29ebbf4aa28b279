"""Vector calls → typed kernel calls, and answers → the vectors' JSON.

Every exported function's call is generated from the WIT (:mod:`._calls`:
the JSON of each type, one call per function, as every host's runner maps
them). Written here are only the host-level calls, which run more than an
export: ``sink.write-fenced`` (a body in the call's transaction),
``sink.read`` (the fence and the body's marker) and ``taskboard.list``
without ``limit`` (its 0.1 form: the whole board, page by page).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..errors import Refused, StorageError
from ..kernel import Kernel
from ._calls import CALLS, task_json, task_state_arg
from .values import Invalid, boolean, field, opt, require, string, u64
from .vectors import Malformed

#: A vector call's implementation: the kernel and the step's arguments.
Call = Callable[[Kernel, Any], Any]

__all__ = ["Call", "Invalid", "dispatch"]


def _write_fenced(k: Kernel, a: Any) -> None:
    resource = string(field(a, "resource"), "resource")
    fail = boolean(field(a, "fail"), "fail")
    fence = u64(require(field(a, "fence"), "fence"), "fence")

    def body(down: Any) -> None:
        # The reference body: append "m" to the resource's marker, then fail
        # if asked to — the append must then vanish with the rest.
        marker = down.get(resource) or ""
        down.put(resource, marker + "m")
        if fail:
            raise RuntimeError("the reference body was asked to fail")

    k.sideeffect.write_fenced(resource, fence, body)


def _sink_read(k: Kernel, a: Any) -> dict[str, Any]:
    resource = string(field(a, "resource"), "resource")
    seen = k.sideeffect.sink_seen(resource)
    marker = k.with_downstream(lambda down: down.get(resource))
    return {"seen-fence": seen, "marker": marker or ""}


def _list(k: Kernel, a: Any) -> Any:
    """``taskboard.list``; without ``limit`` the 0.1 form: the whole board."""
    if field(a, "limit") is not None:
        return CALLS["taskboard.list"](k, a)
    state = opt(task_state_arg, field(a, "state"), "state")
    out: list[Any] = []
    after: Optional[str] = None
    while True:
        page = k.taskboard.list(state, after, 1000)
        out.extend(task_json(t) for t in page.items)
        after = page.next
        if after is None:
            return out


_CALLS: dict[str, Call] = {
    **CALLS,
    "sink.write-fenced": _write_fenced,
    "sink.read": _sink_read,
    "taskboard.list": _list,
}


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
