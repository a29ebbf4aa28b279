"""Generic codecs: any value of the contract's types lowered into, and
lifted from, wasmtime's C API values (:mod:`gak._layout`), one codec object
per type node, built once per function from the types the component itself
declares (:func:`codec_of`).

They are the reference and the fallback: the generated modules
(:mod:`gak._lower`, :mod:`gak._lift`, :mod:`gak._store_abi`) do the same
work per type in straight-line code, and hand to these whatever they do not
take exactly — these raise the errors (:class:`ArgError` for a value out
of range, not a case or not Unicode text; ``TypeError`` for a value of the
wrong Python type). The tests check the generated code against them.

They also keep every ``result`` tagged, ``(True, ok)`` / ``(False, err)``,
where wasmtime-py 50 maps a ``result`` to a bare value when its cases "look
different" (so a host function could not return the ``err`` of
``result<option<string>, store-error>``: ``none`` matches first).

Representation on the Python side: ``string`` → ``str``; ``s32``/``u32``/``u64``
→ ``int``; ``list<u8>`` → ``bytes``; other lists → ``list``; records and
tuples → ``tuple`` in declaration order; ``option`` → value or ``None``;
``result`` → ``(is_ok, payload)``; ``variant`` → ``(case, payload)``;
``enum`` → ``str``.
"""

from __future__ import annotations

import struct
from typing import Any, Sequence

from wasmtime.component import _types as wt

from . import _layout as L
from ._mem import MEM, ZERO_COPY, Arena, constant


class ArgError(Exception):
    """A Python value that cannot be sent: out of range, not a case, not UTF-8."""


_VAL, _OF, _ENTRY = L.VAL, L.PAYLOAD, L.ENTRY
_QQ = struct.Struct("<QQ").unpack_from
_Q = struct.Struct("<Q").unpack_from
_I = struct.Struct("<I").unpack_from
_i = struct.Struct("<i").unpack_from
_put_qq = struct.Struct("<QQ").pack_into
_put_kind_qq = struct.Struct("<B7xQQ").pack_into
_put_kind_q = struct.Struct("<B7xQ").pack_into
_put_kind_u32 = struct.Struct("<B7xI").pack_into
_put_kind_s32 = struct.Struct("<B7xi").pack_into
_put_kind_u8 = struct.Struct("<B7xB").pack_into
_put_kind_bool = struct.Struct("<B7x?").pack_into
_put_kind_result = struct.Struct("<B7x?7xQ").pack_into
_put_kind_variant = struct.Struct("<B7xQQQ").pack_into
_U64_BOUND = 1 << 64

# Every codec lowers a Python value into the Val at absolute address `at`,
# taking nested memory from `arena`, and lifts the Val at `at`.


class Codec:
    """Lowers a Python value into a Val slot and lifts one back."""

    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def lift(self, at: int) -> Any:  # pragma: no cover
        raise NotImplementedError


def _int(value: Any, bound: int, name: str) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an int for {name}, got {type(value).__name__}")
        value = int(value)
    if not 0 <= value < bound:
        raise ArgError(f"{value} is out of range for {name}")
    return value


def _utf8(value: Any) -> bytes:
    if type(value) is not str and not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgError(f"not valid Unicode text: {e.reason}") from None


def text(arena: Arena, value: Any) -> tuple[int, int]:
    """``(length, address)`` of the UTF-8 of ``value`` (a ``str``): its own
    buffer when it is compact ASCII, else an encoded copy the arena holds."""
    if type(value) is str and ZERO_COPY:
        i = id(value)
        if MEM[i + L.STR_STATE] & L.COMPACT_ASCII == L.COMPACT_ASCII:
            return len(value), i + L.STR_DATA
    data = _utf8(value)
    return len(data), arena.hold(data)


def _read_name(at: int) -> str:
    n, data = _QQ(MEM, at)
    if not n:
        return ""
    return MEM[data : data + n].tobytes().decode("utf-8")


class Bool(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"expected a bool, got {type(value).__name__}")
        _put_kind_bool(MEM, at, L.BOOL, value)

    def lift(self, at: int) -> Any:
        return MEM[at + _OF] != 0


class U64(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        if type(value) is not int or not 0 <= value < _U64_BOUND:
            value = _int(value, _U64_BOUND, "u64")
        _put_kind_q(MEM, at, L.U64, value)

    def lift(self, at: int) -> Any:
        return _Q(MEM, at + _OF)[0]


class U8(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_u8(MEM, at, L.U8, _int(value, 1 << 8, "u8"))

    def lift(self, at: int) -> Any:
        return MEM[at + _OF]


class U32(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_u32(MEM, at, L.U32, _int(value, 1 << 32, "u32"))

    def lift(self, at: int) -> Any:
        return _I(MEM, at + _OF)[0]


class S32(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        if type(value) is not int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"expected an int for s32, got {type(value).__name__}")
            value = int(value)
        if not -(1 << 31) <= value < 1 << 31:
            raise ArgError(f"{value} is out of range for s32")
        _put_kind_s32(MEM, at, L.S32, value)

    def lift(self, at: int) -> Any:
        return _i(MEM, at + _OF)[0]


class String(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        n, data = text(arena, value)
        _put_kind_qq(MEM, at, L.STRING, n, data)

    def lift(self, at: int) -> Any:
        return _read_name(at + _OF)


class Bytes(Codec):
    """``list<u8>``: built and read as whole buffers, not element by element
    (a 1 MiB payload would otherwise take seconds)."""

    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(value).__name__}")
        data = bytes(value)
        n = len(data)
        addr = 0
        if n:
            # n consecutive Val{kind: u8, payload: the byte}, zero elsewhere.
            addr = arena.alloc(_VAL * n)
            MEM[addr : addr + _VAL * n : _VAL] = bytes((L.U8,)) * n
            MEM[addr + _OF : addr + _VAL * n : _VAL] = data
        _put_kind_qq(MEM, at, L.LIST, n, addr)

    def lift(self, at: int) -> Any:
        n, data = _QQ(MEM, at + _OF)
        if not n:
            return b""
        d = data + _OF
        return MEM[d : d + _VAL * n : _VAL].tobytes()


class List(Codec):
    __slots__ = ("elem",)

    def __init__(self, elem: Codec) -> None:
        self.elem = elem

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        n = len(value)
        addr = arena.alloc(_VAL * n) if n else 0
        lower = self.elem.lower
        for i in range(n):
            lower(value[i], arena, addr + i * _VAL)
        _put_kind_qq(MEM, at, L.LIST, n, addr)

    def lift(self, at: int) -> Any:
        n, data = _QQ(MEM, at + _OF)
        lift = self.elem.lift
        return [lift(data + i * _VAL) for i in range(n)]


class Record(Codec):
    __slots__ = ("names", "fields", "n", "offsets", "consts")

    def __init__(self, names: Sequence[str], fields: Sequence[Codec]) -> None:
        self.names = [n.encode("utf-8") for n in names]
        self.fields = list(fields)
        self.n = len(self.fields)
        self.offsets = [i * _ENTRY + L.ENTRY_VAL for i in range(self.n)]
        #: The field names, copied once into memory that lives as long as
        #: the process (wasmtime reads them with the value): (len, address).
        self.consts = [constant(n) for n in names]

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        n = self.n
        if len(value) != n:
            raise TypeError(f"expected a record of {n} fields, got {len(value)}")
        addr = arena.alloc(_ENTRY * n)
        for i in range(n):
            entry = addr + i * _ENTRY
            _put_qq(MEM, entry, *self.consts[i])
            self.fields[i].lower(value[i], arena, entry + L.ENTRY_VAL)
        _put_kind_qq(MEM, at, L.RECORD, n, addr)

    def lift(self, at: int) -> Any:
        data = _QQ(MEM, at + _OF)[1]
        return tuple([f.lift(data + o) for f, o in zip(self.fields, self.offsets)])


class Tuple(Codec):
    __slots__ = ("elems",)

    def __init__(self, elems: Sequence[Codec]) -> None:
        self.elems = list(elems)

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        n = len(self.elems)
        if len(value) != n:
            raise TypeError(f"expected a tuple of {n}, got {len(value)}")
        addr = arena.alloc(_VAL * n)
        for i, codec in enumerate(self.elems):
            codec.lower(value[i], arena, addr + i * _VAL)
        _put_kind_qq(MEM, at, L.TUPLE, n, addr)

    def lift(self, at: int) -> Any:
        data = _QQ(MEM, at + _OF)[1]
        return tuple([c.lift(data + i * _VAL) for i, c in enumerate(self.elems)])


def _boxed(codec: Codec, value: Any, arena: Arena) -> int:
    addr = arena.alloc(_VAL)
    codec.lower(value, arena, addr)
    return addr


class Option(Codec):
    __slots__ = ("inner",)

    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_q(MEM, at, L.OPTION, 0 if value is None else _boxed(self.inner, value, arena))

    def lift(self, at: int) -> Any:
        p = _Q(MEM, at + _OF)[0]
        return self.inner.lift(p) if p else None


class Result(Codec):
    __slots__ = ("ok", "err")

    def __init__(self, ok: Codec | None, err: Codec | None) -> None:
        self.ok = ok
        self.err = err

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        is_ok, payload = value
        codec = self.ok if is_ok else self.err
        _put_kind_result(MEM, at, L.RESULT, bool(is_ok), 0 if codec is None else _boxed(codec, payload, arena))

    def lift(self, at: int) -> Any:
        a = at + _OF
        is_ok = MEM[a] != 0
        codec = self.ok if is_ok else self.err
        if codec is None:
            return (is_ok, None)
        return (is_ok, codec.lift(_Q(MEM, a + 8)[0]))


class Variant(Codec):
    __slots__ = ("cases", "consts")

    def __init__(self, cases: Sequence[tuple[str, Codec | None]]) -> None:
        self.cases = {name: (name.encode("utf-8"), codec) for name, codec in cases}
        self.consts = {name: constant(name) for name in self.cases}

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        tag, payload = value
        case = self.cases.get(tag)
        if case is None:
            raise ArgError(f"{tag!r} is not a case of this variant")
        codec = case[1]
        boxed = 0 if codec is None else _boxed(codec, payload, arena)
        _put_kind_variant(MEM, at, L.VARIANT, *self.consts[tag], boxed)

    def lift(self, at: int) -> Any:
        tag = _read_name(at + _OF)
        codec = self.cases[tag][1]
        if codec is None:
            return (tag, None)
        return (tag, codec.lift(_Q(MEM, at + _OF + 16)[0]))


class Enum(Codec):
    __slots__ = ("names", "consts")

    def __init__(self, names: Sequence[str]) -> None:
        self.names = {n: n.encode("utf-8") for n in names}
        #: Each name's (len, address), lowered once for the process.
        self.consts = {n: constant(n) for n in names}

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        name = self.consts.get(value) if isinstance(value, str) else None
        if name is None:
            raise ArgError(f"{value!r} is not one of {sorted(self.names)}")
        _put_kind_qq(MEM, at, L.ENUM, *name)

    def lift(self, at: int) -> Any:
        return _read_name(at + _OF)


def codec_of(ty: Any) -> Codec:
    """The codec of one wasmtime-py component type, built once."""
    if isinstance(ty, wt.Bool):
        return Bool()
    if isinstance(ty, wt.U8):
        return U8()
    if isinstance(ty, wt.S32):
        return S32()
    if isinstance(ty, wt.U32):
        return U32()
    if isinstance(ty, wt.U64):
        return U64()
    if isinstance(ty, wt.String):
        return String()
    if isinstance(ty, wt.ListType):
        elem = ty.element
        return Bytes() if isinstance(elem, wt.U8) else List(codec_of(elem))
    if isinstance(ty, wt.RecordType):
        fields = ty.fields
        return Record([n for n, _ in fields], [codec_of(t) for _, t in fields])
    if isinstance(ty, wt.TupleType):
        return Tuple([codec_of(t) for t in ty.elements])
    if isinstance(ty, wt.OptionType):
        return Option(codec_of(ty.payload))
    if isinstance(ty, wt.ResultType):
        ok, err = ty.ok, ty.err
        return Result(None if ok is None else codec_of(ok), None if err is None else codec_of(err))
    if isinstance(ty, wt.VariantType):
        return Variant([(n, None if t is None else codec_of(t)) for n, t in ty.cases])
    if isinstance(ty, wt.EnumType):
        return Enum(ty.names)
    raise TypeError(f"gak's WIT uses no {type(ty).__name__}")


def describe(ty: Any) -> str:
    """A wasmtime-py component type (a function's too) spelled as
    :data:`gak._signatures.SIGNATURES` spells the WIT's: records with their
    fields, enums and variants with their cases."""
    if isinstance(ty, wt.FuncType):
        params = ", ".join(f"{n}: {describe(t)}" for n, t in ty.params)
        result = ty.result
        return f"func({params})" if result is None else f"func({params}) -> {describe(result)}"
    for cls, name in ((wt.Bool, "bool"), (wt.U8, "u8"), (wt.S32, "s32"), (wt.U32, "u32"), (wt.U64, "u64"), (wt.String, "string")):
        if isinstance(ty, cls):
            return name
    if isinstance(ty, wt.ListType):
        return f"list<{describe(ty.element)}>"
    if isinstance(ty, wt.OptionType):
        return f"option<{describe(ty.payload)}>"
    if isinstance(ty, wt.TupleType):
        return f"tuple<{', '.join(describe(t) for t in ty.elements)}>"
    if isinstance(ty, wt.ResultType):
        ok, err = ty.ok, ty.err
        return f"result<{'_' if ok is None else describe(ok)}, {'_' if err is None else describe(err)}>"
    if isinstance(ty, wt.RecordType):
        return "record {" + ", ".join(f"{n}: {describe(t)}" for n, t in ty.fields) + "}"
    if isinstance(ty, wt.VariantType):
        return "variant {" + ", ".join(n if t is None else f"{n}({describe(t)})" for n, t in ty.cases) + "}"
    if isinstance(ty, wt.EnumType):
        return "enum {" + ", ".join(ty.names) + "}"
    return type(ty).__name__
