"""Parsing, substitution, matching and binding for vector scenarios
(``VECTORS.md``), as the Rust runner (``host/rust/cli/src/conformance/vector.rs``)
does them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..clock import ManualClock
from ..errors import CODES

RESERVED = ("any", "none", "hex128")
#: Every error variant a vector may name.
NAMES = CODES | {"storage"}


class Malformed(Exception):
    """A step the runner cannot execute (it fails the scenario)."""


@dataclass
class Scenario:
    name: Optional[str]
    steps: list[Any]


def parse_file(text: str) -> list[Scenario]:
    """A file holding one scenario object or an array of them."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise Malformed(f"invalid JSON: {e}") from None
    if isinstance(value, dict):
        items = [value]
    elif isinstance(value, list):
        items = value
    else:
        raise Malformed("$: expected a scenario object or an array of them")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise Malformed(f"$[{i}]: expected a scenario object")
        name = item.get("scenario")
        if name is not None and not isinstance(name, str):
            raise Malformed(f"$[{i}].scenario: expected a string")
        steps = item.get("steps")
        if not isinstance(steps, list):
            raise Malformed(f"$[{i}].steps: expected an array")
        out.append(Scenario(name, steps))
    return out


def _u64(v: Any) -> Optional[int]:
    return v if type(v) is int and v >= 0 else None


#: (kernel factory given the scenario's clock, vector call dispatcher)
Dispatch = Callable[[Any, str, Any], tuple[bool, Any]]


def run_scenario(
    fresh: Callable[[ManualClock], Any], dispatch: Dispatch, scenario: Scenario, file: str, index: int
) -> Optional[str]:
    """Run one scenario on a fresh store; a failure description, or None."""
    clock = ManualClock(0)
    try:
        kernel = fresh(clock)
    except Exception as e:  # noqa: BLE001 - reported as the scenario's failure
        return f"cannot open a fresh store: {e}"
    binds: dict[str, Any] = {}
    try:
        for i, step in enumerate(scenario.steps):
            at = f"step {i} ({file}: $[{index}].steps[{i}])"
            try:
                _step(kernel, clock, dispatch, step, binds)
            except Malformed as e:
                return f"{at}: {e}"
        return None
    finally:
        close = getattr(kernel, "close", None)
        if close is not None:
            close()


def _step(kernel: Any, clock: ManualClock, dispatch: Dispatch, step: Any, binds: dict[str, Any]) -> None:
    if not isinstance(step, dict):
        raise Malformed("expected an object")
    kinds = [k for k in ("clock", "advance", "call") if k in step]
    if len(kinds) != 1:
        raise Malformed("needs exactly one of clock / advance / call")
    kind = kinds[0]
    if kind == "clock":
        to = _u64(step["clock"])
        if to is None:
            raise Malformed("clock: expected ms")
        try:
            clock.set(to)
        except ValueError as e:
            raise Malformed(str(e)) from None
    elif kind == "advance":
        by = _u64(step["advance"])
        if by is None:
            raise Malformed("advance: expected ms")
        clock.advance(by)
    else:
        _call_step(kernel, dispatch, step, binds)


def _call_step(kernel: Any, dispatch: Dispatch, step: dict[str, Any], binds: dict[str, Any]) -> None:
    name = step["call"]
    if not isinstance(name, str):
        raise Malformed("call: expected a name")
    args = substitute(step.get("args", None), binds)
    has_ok, has_err = "ok" in step, "err" in step
    if has_ok == has_err:
        raise Malformed(f"{name}: needs exactly one of ok / err")
    want_err = step.get("err")
    if has_err:
        if not isinstance(want_err, str):
            raise Malformed("err: expected a variant name")
        if want_err not in NAMES:
            raise Malformed(f"{name}: unknown error variant {want_err!r}")
    ok, got = dispatch(kernel, name, args)
    if has_ok:
        want = step["ok"]
        if not ok:
            raise Malformed(f"{name}: expected ok {_show(want)}, got err {got[0]}")
        if not matches(want, True, got, binds):
            raise Malformed(f"{name}: expected ok {_show(want)}, got ok {_show(got)}")
    else:
        if ok:
            raise Malformed(f"{name}: expected err {json.dumps(want_err)}, got ok {_show(got)}")
        if got[0] != want_err:
            detail = f"{got[0]}: {got[1]}" if got[1] else got[0]
            raise Malformed(f"{name}: expected err {json.dumps(want_err)}, got err {detail}")
    bind = step.get("bind")
    if bind is not None and ok:
        if not isinstance(bind, dict):
            raise Malformed("bind: expected an object")
        for as_name, path in bind.items():
            if as_name in RESERVED:
                raise Malformed(f"bind: {as_name!r} is reserved")
            if not isinstance(path, str):
                raise Malformed("bind: paths are strings")
            found, value = lookup(got, path)
            if not found:
                raise Malformed(f"bind: no {path!r} in {_show(got)}")
            binds[as_name] = value


def _show(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def lookup(value: Any, path: str) -> tuple[bool, Any]:
    """The value at a dotted path (numeric parts index arrays); "" is the whole."""
    if path == "":
        return True, value
    for part in path.split("."):
        if isinstance(value, list):
            if not part.isdigit() or int(part) >= len(value):
                return False, None
            value = value[int(part)]
        elif isinstance(value, dict):
            if part not in value:
                return False, None
            value = value[part]
        else:
            return False, None
    return True, value


def _bound(binds: dict[str, Any], name: str) -> Any:
    if name not in binds:
        raise Malformed(f"${name} is not bound")
    return binds[name]


def substitute(v: Any, binds: dict[str, Any]) -> Any:
    """Replace ``$name``, ``$$literal`` and ``{"$merge": name, ...}`` in args."""
    if isinstance(v, str):
        if v.startswith("$$"):
            return v[1:]
        if v.startswith("$"):
            return _bound(binds, v[1:])
        return v
    if isinstance(v, list):
        return [substitute(i, binds) for i in v]
    if isinstance(v, dict):
        if "$merge" in v:
            name = v["$merge"]
            if not isinstance(name, str):
                raise Malformed("$merge: expected a name")
            base = _bound(binds, name)
            if not isinstance(base, dict):
                raise Malformed(f"$merge: ${name} is not an object")
            merged = dict(base)
            for k, x in v.items():
                if k != "$merge":
                    merged[k] = substitute(x, binds)
            return merged
        return {k: substitute(x, binds) for k, x in v.items()}
    return v


def _is_hex128(v: Any) -> bool:
    return isinstance(v, str) and len(v) == 32 and all(c in "0123456789abcdef" for c in v)


def _same(a: Any, b: Any) -> bool:
    # JSON equality: 1 == 1.0, but true is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def matches(want: Any, present: bool, got: Any, binds: dict[str, Any]) -> bool:
    """Does the actual value (``present`` says whether the key exists) match
    the expected pattern?"""
    there = present and got is not None
    if isinstance(want, str):
        if want == "$any":
            return there
        if want == "$none":
            return not there
        if want == "$hex128":
            return present and _is_hex128(got)
        if want.startswith("$$"):
            return present and _same(got, want[1:])
        if want.startswith("$"):
            return present and _deep_equal(got, _bound(binds, want[1:]))
        return present and _same(got, want)
    if isinstance(want, dict):
        if len(want) == 1 and "$ne" in want:
            name = want["$ne"]
            if not isinstance(name, str):
                raise Malformed("$ne: expected a name")
            return there and not _deep_equal(got, _bound(binds, name))
        if not (present and isinstance(got, dict)):
            return False
        return all(matches(w, k in got, got.get(k), binds) for k, w in want.items())
    if isinstance(want, list):
        if not (present and isinstance(got, list) and len(got) == len(want)):
            return False
        return all(matches(w, True, g, binds) for w, g in zip(want, got))
    if want is None:
        return not there
    return present and _same(got, want)


def _deep_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b))
    return _same(a, b)
