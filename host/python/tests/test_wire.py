"""gak._wire (generated from the WIT) agrees with the component by field
name: every record an export takes is lowered with each field where the
component's record has it; and the types the generated lifts and
lowerings were written for (gak._signatures) are the component's."""

from __future__ import annotations

import re
from dataclasses import fields
from enum import Enum
from typing import Any, Iterator

from gak import _abi, _codecs, _engine, _signatures, _wire
from gak.component import find_component
from gak.types import (
    Action,
    Completion,
    Lease,
    Outcome,
    Resolution,
    RetrySafety,
    Snapshot,
    Status,
    StepDef,
    TaskSeed,
    TaskState,
)

#: One value of every record an export takes, each field distinct.
SAMPLES = [
    StepDef("s", ("a", "b")),
    Snapshot("r", 7, "st", ["d"], {"k": "v", "a": "b"}, fence=3),
    Outcome(Status.FAILED, b"x"),
    Action("k", "r", RetrySafety.UNSAFE, "f"),
    Lease("k", "r", 4, "h", 9),
    Resolution(True, b"y", True, "c"),
    TaskSeed("t", "title", ("d",), TaskState.DONE, -2, 11, 3, "g"),
    Completion("t", "tok"),
]


def _exports() -> Iterator[tuple[str, _abi.FuncCodec]]:
    compiled = _engine.compiled(find_component())
    for qualified, item in compiled.component.type.exports(compiled.engine).items():
        iface = qualified.partition("/")[2].partition("@")[0]
        for fn, member in item.ty.exports(compiled.engine).items():
            if hasattr(member.ty, "params"):
                yield f"{iface}#{fn}", compiled.export(f"{iface}#{fn}")[1]


def _records(codec: Any) -> Iterator[Any]:
    """Every record codec in a codec tree."""
    if isinstance(codec, _codecs.Record):
        yield codec
        for f in codec.fields:
            yield from _records(f)
    for inner in ("elem", "inner", "ok", "err"):
        if getattr(codec, inner, None) is not None:
            yield from _records(getattr(codec, inner))
    for e in getattr(codec, "elems", ()):
        yield from _records(e)
    if isinstance(codec, _codecs.Variant):
        for _, case in codec.cases.values():
            if case is not None:
                yield from _records(case)


def _names(codec: Any) -> tuple[str, ...]:
    return tuple(n.decode() for n in codec.names)


def _on_the_wire(v: Any) -> Any:
    """A dataclass field's value as its lowering sends it."""
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, dict):
        return sorted(v.items())
    if isinstance(v, tuple):
        return list(v)
    return v


def test_each_field_is_lowered_where_the_components_record_has_it() -> None:
    taken = {_names(r): r for _, codec in _exports() for p in codec.params for r in _records(p)}
    covered = set()
    for sample in SAMPLES:
        cls = type(sample)
        wit = {f.name.replace("_", "-"): f.name for f in fields(cls)}
        (names,) = [n for n in taken if set(n) == set(wit)]
        lower = getattr(_wire, "lower_" + re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower())
        sent = dict(zip(names, lower(sample), strict=True))
        for name, attr in wit.items():
            assert sent[name] == _on_the_wire(getattr(sample, attr)), (cls.__name__, name)
        covered.add(names)
    assert covered == set(taken), set(taken) - covered  # every record an export takes


def test_the_signatures_are_the_components() -> None:
    """Every function the generated code serves has, in the component, the
    type it was generated for (records' fields by name and order, enums'
    and variants' cases), and the component has no other gak function."""
    from wasmtime.component import _types as wt

    compiled = _engine.compiled(find_component())
    ty = compiled.component.type
    found = {}
    for name, item in list(ty.imports(compiled.engine).items()) + list(ty.exports(compiled.engine).items()):
        if name.startswith("gak:kernel/"):
            iface = name.partition("/")[2].partition("@")[0]
            for fn, member in item.ty.exports(compiled.engine).items():
                if isinstance(member.ty, wt.FuncType):
                    found[f"{iface}#{fn}"] = _codecs.describe(member.ty)
    assert found == _signatures.SIGNATURES
