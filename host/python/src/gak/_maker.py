"""Building the API's answers fast: :func:`maker`."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable


def maker(cls: type) -> Callable[..., Any]:
    """A constructor of the dataclass ``cls`` taking every field
    positionally, in declaration order (the WIT's, for the generated
    :mod:`gak.types`), for the API's results (one per call): it fills the
    instance's ``__dict__`` directly, where a frozen dataclass's generated
    ``__init__`` sets each field through ``object.__setattr__``, about three
    times the cost. The instance is the same: same type, fields, equality,
    hash and repr. Only for classes without ``__post_init__``, defaults that
    compute, or slots."""
    names = [f.name for f in fields(cls)]
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__}: build it with its own __init__")
    params = ", ".join(names)
    body = "".join(f"    d[{n!r}] = {n}\n" for n in names)
    src = f"def make({params}):\n    o = new(cls)\n    d = o.__dict__\n{body}    return o\n"
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    exec(src, scope)  # noqa: S102 - source built above from the field names only
    make: Callable[..., Any] = scope["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make
