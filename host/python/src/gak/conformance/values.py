"""The vectors' JSON values of the WIT's primitive types (``host/gen/README.md``,
"The vectors' JSON shape"), and the helpers the generated converters of
:mod:`._calls` compose.

Each reader takes a JSON value (``None`` when absent or ``null``) and its
path ``at`` for messages. Absent is the type's zero — ``""``, ``0``, ``[]``,
``false``, none, an enum's first case — which the component then judges.
A value of the wrong JSON type is :class:`~.vectors.Malformed` (the scenario
fails, naming the path); an enum name the contract does not have, or a
number outside the type's range, is :class:`Invalid` (the call's
``invalid-input``).
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Callable, Optional, TypeVar

from .vectors import Malformed

T = TypeVar("T")
E = TypeVar("E", bound=Enum)


class Invalid(Exception):
    """A value no caller should send (unknown enum string, number out of
    range): the call's answer is ``invalid-input``."""


def show(v: Any) -> str:
    return json.dumps(v)


def field(obj: Any, key: str) -> Any:
    """``obj[key]``, or ``None`` when ``obj`` is no object or lacks it."""
    return obj.get(key) if isinstance(obj, dict) else None


def require(v: Any, at: str) -> Any:
    """``v``, which must be present."""
    if v is None:
        raise Malformed(f"missing {at}")
    return v


def obj(v: Any, at: str) -> dict[str, Any]:
    """A record's object: it must be present."""
    if not isinstance(require(v, at), dict):
        raise Malformed(f"{at}: expected an object, got {show(v)}")
    return v  # type: ignore[no-any-return]


def string(v: Any, at: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise Malformed(f"{at}: expected a string, got {show(v)}")
    return v


def _number(v: Any, at: str, bits: int) -> int:
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Malformed(f"{at}: expected a number, got {show(v)}")
    if not isinstance(v, int) or not 0 <= v < 1 << bits:
        raise Invalid(f"{at}: {v} is not a u{bits}")
    return v


def u64(v: Any, at: str) -> int:
    return _number(v, at, 64)


def u32(v: Any, at: str) -> int:
    return _number(v, at, 32)


def u8(v: Any, at: str) -> int:
    return _number(v, at, 8)


def s32(v: Any, at: str) -> int:
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Malformed(f"{at}: expected a number, got {show(v)}")
    if not isinstance(v, int) or not -(1 << 31) <= v < 1 << 31:
        raise Invalid(f"{at}: {v} is not an s32")
    return v


def boolean(v: Any, at: str) -> bool:
    if v is None:
        return False
    if not isinstance(v, bool):
        raise Malformed(f"{at}: expected a bool, got {show(v)}")
    return v


def data(v: Any, at: str) -> bytes:
    """``list<u8>``: a UTF-8 string."""
    return string(v, at).encode("utf-8", "surrogatepass")


def pairs(v: Any, at: str) -> dict[str, str]:
    """``list<tuple<string, string>>`` (a map): an object of strings."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise Malformed(f"{at}: expected an object, got {show(v)}")
    for k, x in v.items():
        if not isinstance(x, str):
            raise Malformed(f"{at}.{k}: expected a string, got {show(x)}")
    return dict(v)


def enum(v: Any, at: str, cls: type[E]) -> E:
    """An enum's case name (absent: its first case)."""
    if v is None:
        return next(iter(cls))
    if not isinstance(v, str):
        raise Malformed(f"{at}: expected a string, got {show(v)}")
    try:
        return cls(v)
    except ValueError:
        raise Invalid(f"{at}: unknown {cls.__name__} {v!r}") from None


def each(item: Callable[[Any, str], T], v: Any, at: str) -> list[T]:
    """``list<T>``: an array, each item read by ``item``."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise Malformed(f"{at}: expected an array, got {show(v)}")
    return [item(x, f"{at}.{i}") for i, x in enumerate(v)]


def opt(item: Callable[[Any, str], T], v: Any, at: str) -> Optional[T]:
    """``option<T>``: absent or ``null`` is none."""
    return None if v is None else item(v, at)


def text(b: bytes) -> str:
    """``list<u8>`` in an answer: its UTF-8, lossy."""
    return b.decode("utf-8", "replace")


def name(v: Any) -> Any:
    """An enum in an answer: its case name."""
    return v.value if isinstance(v, Enum) else v
