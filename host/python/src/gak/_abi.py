"""Values across the component boundary, written against wasmtime-py 50.0.1.

This is the ONE module that reaches below wasmtime-py's public API (its
``_ffi`` bindings of the C API and the layout of ``wasmtime_component_val_t``).
It exists for two reasons, both measured with this component:

- **Speed.** wasmtime-py 50 re-derives every component type on every call
  (``Func.__call__`` reads ``FuncType.params`` and walks record fields through
  ``valtype_from_ptr``); a claim cost ~314 µs, mostly there. Here each
  function's types become a tree of codecs once per component, and calls and
  host functions reuse it.
- **Correctness.** wasmtime-py maps a ``result`` to a bare Python value when
  its cases "look different", so a host function could not return the
  ``err`` case of gak:kernel@0.2.0's ``result<option<string>, store-error>``
  (``none`` matches first). The codecs here keep every ``result`` tagged:
  ``(True, ok)`` / ``(False, err)``.

The store import of gak:kernel@0.3.0 crosses twice per call (``store.read``,
``store.write``) with batches, so its three types — ``reads``, ``answers``
and ``list<change>`` — have codecs of their own that read or write whole
entries with a few ``struct`` calls.

Representation on the Python side (internal; :mod:`gak.kernel` maps it to
dataclasses): ``string`` → ``str``; ``u32``/``u64`` → ``int`` (range-checked
before anything is lowered); ``list<u8>`` → ``bytes``; other lists → ``list``;
records and tuples → ``tuple`` in declaration order; ``option`` → value or
``None``; ``result`` → ``(is_ok, payload)``; ``variant`` → ``(case, payload)``;
``enum`` → ``str``.

How values move (``crates/c-api/src/component``): the C API only *reads*
an export's arguments (``Val::from(&c_val)``), so they are built entirely in
Python-owned memory (an :class:`Arena` per call) with no C call at all; the
value an export returns is wasmtime's allocation, read and then deleted; a
host function's arguments are read in place; its result is built in an arena
and handed over with ONE ``wasmtime_component_val_clone`` (a deep copy into
wasmtime's allocator, which is what wasmtime later drops). Memory is read and
written through one ``memoryview`` over the address space (:data:`MEM`), so a
field access is a ``struct`` call, not a ctypes object.

``tests/test_abi.py`` pins all of this: the version, the struct layout the
byte-list fast path relies on, and the wasmtime-py behaviour this module works
around (so we notice when it is fixed upstream).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import struct
import threading
from ctypes import byref, c_char_p, c_size_t, c_void_p, string_at
from typing import Any, Callable, Iterator, Sequence

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime.component import _types as wt

#: The wasmtime-py version this module was written and tested against.
WASMTIME_VERSION = "50.0.1"

Val = ffi.wasmtime_component_val_t

# Kinds of wasmtime_component_val_t (crates/c-api/include/wasmtime/component/val.h).
_BOOL, _U8, _U32_KIND, _U64_KIND = 0, 2, 6, 8
_STRING, _LIST, _RECORD, _TUPLE, _VARIANT, _ENUM, _OPTION, _RESULT = 12, 13, 14, 15, 16, 17, 18, 19


#: The library wasmtime-py loaded, opened again as a PyDLL: calls keep the
#: GIL (they are short, or call back into Python), which saves releasing and
#: re-taking it around every call and callback.
_lib = ctypes.PyDLL(ffi.dll._name)


def _fn(name: str, restype: Any, *argtypes: Any) -> Any:
    # `_lib[name]` makes a fresh function object, so these prototypes do not
    # change the ones wasmtime-py's own bindings use.
    f = _lib[name]
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_val_clone = _fn("wasmtime_component_val_clone", None, c_void_p, c_void_p)
val_delete = _fn("wasmtime_component_val_delete", None, c_void_p)
# With the GIL held during an export call, the host functions it calls back
# (all Python) need not take it again. A call spends most of its time in
# those host functions anyway; SQLite and psycopg release the GIL themselves
# while they wait for I/O.
_func_call = _fn(
    "wasmtime_component_func_call", c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t
)

# Layouts of the C API's structs on 64-bit targets (asserted here and in
# tests/test_abi.py): a Val is {kind: u8, payload at 8}, 32 bytes; a vec or
# name is {size: usize, data: ptr}; a record entry is {name, val at 16}, 48
# bytes; a variant is {name, val ptr at 16}; a result is {is_ok, val ptr at 8};
# an option is a val ptr.
_VAL = 32
_OF = 8
_ENTRY = 48
assert ctypes.sizeof(Val) == _VAL and Val.of.offset == _OF
assert ctypes.sizeof(ffi.wasmtime_component_valrecord_entry_t) == _ENTRY
assert ffi.wasmtime_component_valrecord_entry_t.val.offset == 16
assert ffi.wasmtime_component_valvariant_t.val.offset == 16
assert ffi.wasmtime_component_valresult_t.val.offset == 8
assert ctypes.sizeof(ctypes.c_void_p) == 8

#: The process's address space as one writable memoryview, offset by
#: ``_BASE`` (no valid object lives in the first page). Reads and writes of
#: C structs go through ``struct.*_from(MEM, addr - _BASE)``.
_BASE = 1 << 12
_PyMemoryView_FromMemory = ctypes.pythonapi.PyMemoryView_FromMemory
_PyMemoryView_FromMemory.restype = ctypes.py_object
_PyMemoryView_FromMemory.argtypes = [c_void_p, ctypes.c_ssize_t, ctypes.c_int]
MEM: memoryview = _PyMemoryView_FromMemory(_BASE, (1 << 47) - _BASE, 0x200)  # PyBUF_WRITE

_addressof = ctypes.addressof
_c_char = ctypes.c_char
_QQ = struct.Struct("<QQ").unpack_from
_Q = struct.Struct("<Q").unpack_from
_I = struct.Struct("<I").unpack_from
_B = struct.Struct("<B").unpack_from
_put_q = struct.Struct("<Q").pack_into
_put_qq = struct.Struct("<QQ").pack_into
_put_kind_qq = struct.Struct("<B7xQQ").pack_into
_put_kind_q = struct.Struct("<B7xQ").pack_into
_put_kind_u32 = struct.Struct("<B7xI").pack_into
_put_kind_u8 = struct.Struct("<B7xB").pack_into
_put_kind_bool = struct.Struct("<B7x?").pack_into
_put_kind_result = struct.Struct("<B7x?7xQ").pack_into
_put_kind_variant = struct.Struct("<B7xQQQ").pack_into


class ArgError(Exception):
    """A Python value that cannot be sent: out of range, not a case, not UTF-8."""


class Trap(Exception):
    """The component trapped (or wasmtime refused the call): the instance is unusable."""


def _buffer(size: int) -> tuple[bytearray, int]:
    """A zeroed Python-owned buffer and its address."""
    buf = bytearray(size)
    return buf, _addressof(_c_char.from_buffer(buf)) if size else 0


class Arena:
    """Python-owned memory for C values: chunks never moved or freed while the
    arena lives. Fresh chunks are zeroed; after :meth:`reset` memory is reused
    as is, so every codec writes every field its kind needs."""

    __slots__ = ("chunks", "pos", "end", "first", "size", "buf", "base")

    def __init__(self, size: int = 4096) -> None:
        self.chunks: list[bytearray] = []
        self.size = size
        self.pos = self.end = 0
        self._grow(size)
        self.first = self.pos

    def _grow(self, size: int) -> None:
        buf, addr = _buffer(size)
        self.chunks.append(buf)
        #: The chunk ``pos`` is in, and its address: bytes are copied into
        #: it by slice assignment of the same length (in place, never a
        #: resize), which costs less than slicing :data:`MEM`.
        self.buf, self.base = buf, addr
        self.pos, self.end = addr, addr + size

    def reset(self) -> "Arena":
        """Reuse the first chunk from its start (drops any others)."""
        if len(self.chunks) > 1:
            del self.chunks[1:]
        self.buf, self.base = self.chunks[0], self.first
        self.pos, self.end = self.first, self.first + self.size
        return self

    def alloc(self, n: int) -> int:
        """The address of ``n`` bytes, 8-aligned."""
        n = (n + 7) & ~7
        if self.pos + n > self.end:
            self._grow(max(4096, n))
        addr = self.pos
        self.pos += n
        return addr

    def copy(self, data: bytes) -> int:
        """The address of a copy of ``data``."""
        n = len(data)
        if not n:
            return 0
        size = (n + 7) & ~7
        addr = self.pos
        if addr + size > self.end:
            self._grow(max(4096, size))
            addr = self.pos
        self.pos = addr + size
        off = addr - self.base
        self.buf[off : off + n] = data
        return addr


class _Scratch(threading.local):
    """Per-thread arenas, reused call after call: one for an export call's
    arguments, one for host functions' results (a host function runs while
    its export call's arguments are still in use)."""

    def __init__(self) -> None:
        self.call = Arena()
        self.host = Arena()


_scratch = _Scratch()
_ZERO_VAL = bytes(32)

#: Python-owned values that live as long as the process: record field names
#: and results lowered once (see FuncCodec.ok_none).
_CONSTANTS = Arena()


# Every codec lowers a Python value into the Val at absolute address `at`,
# taking nested memory from `arena`, and lifts the Val at `at`.


class Codec:
    """Lowers a Python value into a Val slot and lifts one back."""

    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def lift(self, at: int) -> Any:  # pragma: no cover
        raise NotImplementedError


class _Bool(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"expected a bool, got {type(value).__name__}")
        _put_kind_bool(MEM, at - _BASE, _BOOL, value)

    def lift(self, at: int) -> Any:
        return MEM[at - _BASE + _OF] != 0


def _int(value: Any, bound: int, name: str) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an int for {name}, got {type(value).__name__}")
        value = int(value)
    if not 0 <= value < bound:
        raise ArgError(f"{value} is out of range for {name}")
    return value


_U64_BOUND = 1 << 64


class _U64Codec(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        if type(value) is not int or not 0 <= value < _U64_BOUND:
            value = _int(value, _U64_BOUND, "u64")
        _put_kind_q(MEM, at - _BASE, _U64_KIND, value)

    def lift(self, at: int) -> Any:
        return _Q(MEM, at - _BASE + _OF)[0]


class _U8Codec(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_u8(MEM, at - _BASE, _U8, _int(value, 1 << 8, "u8"))

    def lift(self, at: int) -> Any:
        return MEM[at - _BASE + _OF]


class _U32Codec(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_u32(MEM, at - _BASE, _U32_KIND, _int(value, 1 << 32, "u32"))

    def lift(self, at: int) -> Any:
        return _I(MEM, at - _BASE + _OF)[0]


def _utf8(value: Any) -> bytes:
    if type(value) is not str and not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgError(f"not valid Unicode text: {e.reason}") from None


def _read_name(at: int) -> str:
    n, data = _QQ(MEM, at - _BASE)
    if not n:
        return ""
    d = data - _BASE
    return MEM[d : d + n].tobytes().decode("utf-8")


class _String(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        data = _utf8(value)
        _put_kind_qq(MEM, at - _BASE, _STRING, len(data), arena.copy(data))

    def lift(self, at: int) -> Any:
        return _read_name(at + _OF)


class _Bytes(Codec):
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
            a = addr - _BASE
            MEM[a : a + _VAL * n : _VAL] = bytes((_U8,)) * n
            MEM[a + _OF : a + _VAL * n : _VAL] = data
        _put_kind_qq(MEM, at - _BASE, _LIST, n, addr)

    def lift(self, at: int) -> Any:
        n, data = _QQ(MEM, at - _BASE + _OF)
        if not n:
            return b""
        d = data - _BASE + _OF
        return MEM[d : d + _VAL * n : _VAL].tobytes()


class _List(Codec):
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
        _put_kind_qq(MEM, at - _BASE, _LIST, n, addr)

    def lift(self, at: int) -> Any:
        n, data = _QQ(MEM, at - _BASE + _OF)
        lift = self.elem.lift
        return [lift(data + i * _VAL) for i in range(n)]


class _Record(Codec):
    __slots__ = ("names", "fields", "n", "offsets")

    def __init__(self, names: Sequence[str], fields: Sequence[Codec]) -> None:
        self.names = [n.encode("utf-8") for n in names]
        self.fields = list(fields)
        self.n = len(self.fields)
        self.offsets = [i * _ENTRY + 16 for i in range(self.n)]

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        n = self.n
        if len(value) != n:
            raise TypeError(f"expected a record of {n} fields, got {len(value)}")
        addr = arena.alloc(_ENTRY * n)
        for i in range(n):
            name = self.names[i]
            entry = addr + i * _ENTRY
            _put_qq(MEM, entry - _BASE, len(name), arena.copy(name))
            self.fields[i].lower(value[i], arena, entry + 16)
        _put_kind_qq(MEM, at - _BASE, _RECORD, n, addr)

    def lift(self, at: int) -> Any:
        data = _QQ(MEM, at - _BASE + _OF)[1]
        return tuple([f.lift(data + o) for f, o in zip(self.fields, self.offsets)])


class _Tuple(Codec):
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
        _put_kind_qq(MEM, at - _BASE, _TUPLE, n, addr)

    def lift(self, at: int) -> Any:
        data = _QQ(MEM, at - _BASE + _OF)[1]
        return tuple([c.lift(data + i * _VAL) for i, c in enumerate(self.elems)])


def _boxed(codec: Codec, value: Any, arena: Arena) -> int:
    addr = arena.alloc(_VAL)
    codec.lower(value, arena, addr)
    return addr


class _Option(Codec):
    __slots__ = ("inner",)

    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_q(MEM, at - _BASE, _OPTION, 0 if value is None else _boxed(self.inner, value, arena))

    def lift(self, at: int) -> Any:
        p = _Q(MEM, at - _BASE + _OF)[0]
        return self.inner.lift(p) if p else None


class _Result(Codec):
    __slots__ = ("ok", "err")

    def __init__(self, ok: Codec | None, err: Codec | None) -> None:
        self.ok = ok
        self.err = err

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        is_ok, payload = value
        codec = self.ok if is_ok else self.err
        _put_kind_result(MEM, at - _BASE, _RESULT, bool(is_ok), 0 if codec is None else _boxed(codec, payload, arena))

    def lift(self, at: int) -> Any:
        a = at - _BASE + _OF
        is_ok = MEM[a] != 0
        codec = self.ok if is_ok else self.err
        if codec is None:
            return (is_ok, None)
        return (is_ok, codec.lift(_Q(MEM, a + 8)[0]))


class _Variant(Codec):
    __slots__ = ("cases",)

    def __init__(self, cases: Sequence[tuple[str, Codec | None]]) -> None:
        self.cases = {name: (name.encode("utf-8"), codec) for name, codec in cases}

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        tag, payload = value
        case = self.cases.get(tag)
        if case is None:
            raise ArgError(f"{tag!r} is not a case of this variant")
        name, codec = case
        boxed = 0 if codec is None else _boxed(codec, payload, arena)
        _put_kind_variant(MEM, at - _BASE, _VARIANT, len(name), arena.copy(name), boxed)

    def lift(self, at: int) -> Any:
        tag = _read_name(at + _OF)
        codec = self.cases[tag][1]
        if codec is None:
            return (tag, None)
        return (tag, codec.lift(_Q(MEM, at - _BASE + _OF + 16)[0]))


class _Enum(Codec):
    __slots__ = ("names", "by_shape")

    def __init__(self, names: Sequence[str]) -> None:
        self.names = {n: n.encode("utf-8") for n in names}
        # Lifting reads two bytes instead of decoding the name when (length,
        # first byte, last byte) tells the cases apart (true of every gak enum).
        shapes = {(len(b), b[0], b[-1]): n for n, b in self.names.items()}
        self.by_shape = shapes if len(shapes) == len(self.names) else None

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        name = self.names.get(value) if isinstance(value, str) else None
        if name is None:
            raise ArgError(f"{value!r} is not one of {sorted(self.names)}")
        _put_kind_qq(MEM, at - _BASE, _ENUM, len(name), arena.copy(name))

    def lift(self, at: int) -> Any:
        if self.by_shape is not None:
            n, data = _QQ(MEM, at - _BASE + _OF)
            d = data - _BASE
            name = self.by_shape.get((n, MEM[d], MEM[d + n - 1])) if n else None
            if name is not None:
                return name
        return _read_name(at + _OF)


# --- the store import's own types (0.3.0), specialised ---------------------
#
# A call crosses into the host twice (`store.read`, `store.write`), so these
# three types are most of what the host lifts and lowers: each is read or
# written with a few `struct` calls over whole entries instead of a codec
# per field. Offsets follow the layouts above: a record's entry i has its
# Val at 48*i + 16, so its payload at 48*i + 24.

#: A record's entries, read from its payload: (n, entries).
_record_entries = _QQ
#: `reads` entries: keys (n, ptr), ranges (n, ptr), clock, entropy.
_reads_fields = struct.Struct("<24xQQ32xQQ32x?47xB").unpack_from
#: A `range` record's entries: table (len, data), prefix (len, data),
#: after (option ptr), limit.
_range_fields = struct.Struct("<24xQQ32xQQ32xQ40xI").unpack_from
#: A `change` record's entries: table (len, data), key (len, data), value
#: (option ptr).
_change_fields = struct.Struct("<24xQQ32xQQ32xQ").unpack_from
#: A `tuple<table, string>`'s two Vals: (len, data) each.
_pair_fields = struct.Struct("<8xQQ16xQQ").unpack_from
#: A record Val (kind, n, entries) followed by the `answers` entries: each
#: (name len, name ptr, kind, payload...).
_put_answers = struct.Struct("<B7xQQ8x" "QQB7xQQ8x" "QQB7xQQ8x" "QQB7xQ16x" "QQB7xQQ8x").pack_into


#: ``struct`` unpackers of ``n`` bytes, for the short strings most values
#: are: unpacking costs less than slicing :data:`MEM` (a new memoryview).
_UNPACK_BYTES: dict[int, Callable[..., tuple[bytes]]] = {}
_SHORT = 4096


def _text(n: int, data: int) -> str:
    """The UTF-8 text at ``data`` (the component's own, so valid)."""
    if not n:
        return ""
    if n <= _SHORT:
        unpack = _UNPACK_BYTES.get(n)
        if unpack is None:
            unpack = _UNPACK_BYTES[n] = struct.Struct(f"{n}s").unpack_from
        return unpack(MEM, data - _BASE)[0].decode()
    d = data - _BASE
    return str(MEM[d : d + n], "utf-8")


class _TableName:
    """Lifts a ``table`` enum from (len, data) without decoding it: the
    table names differ in (length, first byte)."""

    __slots__ = ("by_first",)

    def __init__(self, enum: Codec) -> None:
        if not isinstance(enum, _Enum):
            raise TypeError("expected the table enum")
        names = {(len(b) << 8) | b[0]: n for n, b in enum.names.items()}
        self.by_first = names if len(names) == len(enum.names) else {}

    def name(self, n: int, data: int) -> str:
        if n:
            found = self.by_first.get((n << 8) | MEM[data - _BASE])
            if found is not None:
                return found
        return _text(n, data)


class _Reads(_Record):
    """``store.reads`` as the host receives it: ``(keys, ranges, clock,
    entropy)`` with keys as ``(table, key)`` and ranges as ``(table, prefix,
    after, limit)`` tuples. Lowering (tests only) is the generic record's."""

    __slots__ = ("table",)

    def __init__(self, names: Sequence[str], fields: Sequence[Codec]) -> None:
        super().__init__(names, fields)
        keys = fields[0]
        if not (isinstance(keys, _List) and isinstance(keys.elem, _Tuple)):
            raise TypeError("reads.keys: expected a list of tuples")
        self.table = _TableName(keys.elem.elems[0])

    def lift(self, at: int) -> Any:
        entries = _QQ(MEM, at - _BASE + _OF)[1] - _BASE
        nk, keys, nr, ranges, clock, entropy = _reads_fields(MEM, entries)
        table = self.table
        first = table.by_first.get
        pairs = []
        for i in range(nk):
            # Each key is a tuple Val: its payload is (2, elements).
            elems = _Q(MEM, keys - _BASE + i * _VAL + 16)[0]
            tl, td, kl, kd = _pair_fields(MEM, elems - _BASE)
            pairs.append((first((tl << 8) | MEM[td - _BASE]) or table.name(tl, td), _text(kl, kd)))
        spans = []
        for i in range(nr):
            fields = _Q(MEM, ranges - _BASE + i * _VAL + 16)[0]
            tl, td, pl, pd, after, limit = _range_fields(MEM, fields - _BASE)
            t = first((tl << 8) | MEM[td - _BASE]) or table.name(tl, td)
            if after:
                al, ad = _QQ(MEM, after - _BASE + _OF)
                spans.append((t, _text(pl, pd), _text(al, ad), limit))
            else:
                spans.append((t, _text(pl, pd), None, limit))
        return (pairs, spans, clock, entropy)


class _Changes(_List):
    """``list<change>`` as the host receives it: ``(table, key, value or
    None)`` tuples. Lowering (tests only) is the generic list's."""

    __slots__ = ("table",)

    def __init__(self, elem: Codec) -> None:
        super().__init__(elem)
        if not isinstance(elem, _Record):
            raise TypeError("change: expected a record")
        self.table = _TableName(elem.fields[0])

    def lift(self, at: int) -> Any:
        n, data = _QQ(MEM, at - _BASE + _OF)
        table = self.table
        first = table.by_first.get
        out = []
        for i in range(n):
            fields = _Q(MEM, data - _BASE + i * _VAL + 16)[0]
            tl, td, kl, kd, value = _change_fields(MEM, fields - _BASE)
            t = first((tl << 8) | MEM[td - _BASE]) or table.name(tl, td)
            if value:
                vl, vd = _QQ(MEM, value - _BASE + _OF)
                out.append((t, _text(kl, kd), _text(vl, vd)))
            else:
                out.append((t, _text(kl, kd), None))
        return out


class _ResultAnswers(_Result):
    """``result<answers, store-error>``: ``ok((values, pages, now,
    entropy))`` written as one block of Vals (the record and its entries
    with one ``pack_into``), the texts after it. ``err`` and lifting are the
    generic result's."""

    __slots__ = ("names",)

    def __init__(self, ok: Codec, err: Codec | None) -> None:
        super().__init__(ok, err)
        if not isinstance(ok, _Record):
            raise TypeError("answers: expected a record")
        # The field names, copied once into memory that lives as long as
        # the process (wasmtime deep-copies them with the value).
        self.names = [(len(n), _CONSTANTS.copy(n)) for n in ok.names]

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        is_ok, payload = value
        if not is_ok:
            super().lower(value, arena, at)
            return
        values, pages, now, entropy = payload
        nv, np_ = len(values), len(pages)
        # record Val, 4 entries, the values' option Vals, their string Vals,
        # the pages' list Vals, now's u64 Val.
        block = arena.alloc(_VAL + 4 * _ENTRY + 2 * _VAL * nv + _VAL * np_ + _VAL)
        entries = block + _VAL
        opts = entries + 4 * _ENTRY
        strs = opts + _VAL * nv
        lists = strs + _VAL * nv
        clock = lists + _VAL * np_
        for i in range(nv):
            v = values[i]
            if v is None:
                _put_kind_q(MEM, opts + i * _VAL - _BASE, _OPTION, 0)
                continue
            data = v.encode("utf-8") if type(v) is str else _utf8(v)
            s = strs + i * _VAL
            _put_kind_q(MEM, opts + i * _VAL - _BASE, _OPTION, s)
            _put_kind_qq(MEM, s - _BASE, _STRING, len(data), arena.copy(data))
        for j in range(np_):
            _lower_page(pages[j], arena, lists + j * _VAL)
        if now is None:
            now_ptr = 0
        else:
            if type(now) is not int or not 0 <= now < _U64_BOUND:
                now = _int(now, _U64_BOUND, "u64")
            _put_kind_q(MEM, clock - _BASE, _U64_KIND, now)
            now_ptr = clock
        if not isinstance(entropy, (bytes, bytearray)):
            raise TypeError(f"expected bytes, got {type(entropy).__name__}")
        ne = len(entropy)
        bytes_ptr = 0
        if ne:
            bytes_ptr = arena.alloc(_VAL * ne)
            a = bytes_ptr - _BASE
            MEM[a : a + _VAL * ne : _VAL] = bytes((_U8,)) * ne
            MEM[a + _OF : a + _VAL * ne : _VAL] = entropy
        (l0, p0), (l1, p1), (l2, p2), (l3, p3) = self.names
        _put_answers(
            MEM,
            block - _BASE,
            _RECORD, 4, entries,
            l0, p0, _LIST, nv, opts if nv else 0,
            l1, p1, _LIST, np_, lists if np_ else 0,
            l2, p2, _OPTION, now_ptr,
            l3, p3, _LIST, ne, bytes_ptr,
        )  # fmt: skip
        _put_kind_result(MEM, at - _BASE, _RESULT, True, block)


def _lower_page(page: Any, arena: Arena, at: int) -> None:
    """One ``list<tuple<string, string>>`` into the Val at ``at``: the tuple
    Vals, then each tuple's two string Vals."""
    if not isinstance(page, (list, tuple)):
        raise TypeError(f"expected a list, got {type(page).__name__}")
    m = len(page)
    if not m:
        _put_kind_qq(MEM, at - _BASE, _LIST, 0, 0)
        return
    tuples = arena.alloc(3 * _VAL * m)
    pairs = tuples + _VAL * m
    for k in range(m):
        key, value = page[k]
        kb = key.encode("utf-8") if type(key) is str else _utf8(key)
        vb = value.encode("utf-8") if type(value) is str else _utf8(value)
        p = pairs + 2 * _VAL * k
        _put_kind_qq(MEM, tuples + k * _VAL - _BASE, _TUPLE, 2, p)
        _put_pair(MEM, p - _BASE, _STRING, len(kb), arena.copy(kb), _STRING, len(vb), arena.copy(vb))
    _put_kind_qq(MEM, at - _BASE, _LIST, m, tuples)


_put_pair = struct.Struct("<B7xQQ8xB7xQQ8x").pack_into

#: Record shapes with a specialised codec, by field names.
_SPECIAL_RECORDS = {("keys", "ranges", "clock", "entropy"): _Reads}


def codec_of(ty: Any) -> Codec:
    """Build the codec for one wasmtime-py component type, once."""
    if isinstance(ty, wt.Bool):
        return _Bool()
    if isinstance(ty, wt.U8):
        return _U8Codec()
    if isinstance(ty, wt.U32):
        return _U32Codec()
    if isinstance(ty, wt.U64):
        return _U64Codec()
    if isinstance(ty, wt.String):
        return _String()
    if isinstance(ty, wt.ListType):
        elem = ty.element
        if isinstance(elem, wt.U8):
            return _Bytes()
        inner = codec_of(elem)
        if isinstance(inner, _Record) and [n.decode() for n in inner.names] == ["table", "key", "value"]:
            return _Changes(inner)
        return _List(inner)
    if isinstance(ty, wt.RecordType):
        fields = ty.fields
        names = tuple(n for n, _ in fields)
        cls = _SPECIAL_RECORDS.get(names, _Record)
        return cls(names, [codec_of(t) for _, t in fields])
    if isinstance(ty, wt.TupleType):
        return _Tuple([codec_of(t) for t in ty.elements])
    if isinstance(ty, wt.OptionType):
        return _Option(codec_of(ty.payload))
    if isinstance(ty, wt.ResultType):
        ok, err = ty.ok, ty.err
        ok_codec = codec_of(ok) if ok is not None else None
        err_codec = codec_of(err) if err is not None else None
        if isinstance(ok_codec, _Record) and [n.decode() for n in ok_codec.names] == [
            "values",
            "pages",
            "now",
            "entropy",
        ]:
            return _ResultAnswers(ok_codec, err_codec)
        return _Result(ok_codec, err_codec)
    if isinstance(ty, wt.VariantType):
        return _Variant([(n, codec_of(t) if t is not None else None) for n, t in ty.cases])
    if isinstance(ty, wt.EnumType):
        return _Enum(ty.names)
    raise TypeError(f"gak's WIT uses no {type(ty).__name__}")


#: What host functions return for `ok` with no payload (``store.write``).
OK_NONE = (True, None)


class FuncCodec:
    """Parameter and result codecs of one component function."""

    __slots__ = ("params", "result", "arity", "names", "ok_none")

    def __init__(self, fty: Any) -> None:
        params = fty.params
        self.names = [n for n, _ in params]
        self.params = [codec_of(t) for _, t in params]
        result = fty.result
        self.result = codec_of(result) if result is not None else None
        self.arity = len(self.params)
        # A frequent host result, lowered once: `store.write` answers it
        # every time it succeeds.
        self.ok_none = 0
        r = self.result
        if isinstance(r, _Result) and r.ok is None:
            self.ok_none = _CONSTANTS.alloc(_VAL)
            self.result.lower(OK_NONE, _CONSTANTS, self.ok_none)


def _error(ptr: int) -> str:
    return str(wasmtime.WasmtimeError._from_ptr(ctypes.cast(ptr, ctypes.POINTER(ffi.wasmtime_error_t))))


def call(func_ptr: int, context: int, codec: FuncCodec, args: Sequence[Any]) -> Any:
    """Call an exported function: lower ``args``, call, lift the result.

    Raises :class:`ArgError` / ``TypeError`` before entering wasm when an
    argument cannot be lowered (nothing ran), and :class:`Trap` when the call
    itself failed (the instance must then be discarded).
    """
    n = codec.arity
    arena = _scratch.call.reset()
    params = arena.alloc(_VAL * n) if n else 0
    for i, c in enumerate(codec.params):
        c.lower(args[i], arena, params + i * _VAL)
    result = codec.result
    out = 0
    if result is not None:
        # wasmtime assigns the result (dropping what the slot held): zero it.
        out = arena.alloc(_VAL)
        MEM[out - _BASE : out - _BASE + _VAL] = _ZERO_VAL
    err = _func_call(func_ptr, context, params or None, n, out or None, 1 if out else 0)
    if err:
        raise Trap(_error(err))
    if result is None:
        return None
    try:
        return result.lift(out)
    finally:
        val_delete(out)  # wasmtime's allocation


#: A host function: receives the store context address and the lifted
#: arguments, returns the Python value of its result.
HostFn = Callable[..., Any]

_HOST_FNS: dict[int, tuple[HostFn, FuncCodec]] = {}
_next_host_fn = [1]

_callback_type = ctypes.CFUNCTYPE(c_size_t, c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t)
_finalizer_type = ctypes.CFUNCTYPE(None, c_void_p)
_add_func = _fn(
    "wasmtime_component_linker_instance_add_func",
    c_void_p,
    c_void_p,
    c_char_p,
    c_size_t,
    _callback_type,
    c_void_p,
    _finalizer_type,
)


def _trap_pointer(message: str) -> int:
    err = wasmtime.WasmtimeError(message)
    return ctypes.cast(err._consume(), c_void_p).value or 0


@_callback_type
def _dispatch(data: int, context: int, _ty: int, args: int, nargs: int, results: int, nresults: int) -> int:
    # An exception escaping here would be printed and swallowed by ctypes;
    # every failure becomes a trap instead, which the host then treats as
    # "instance unusable". Arguments are wasmtime's (read in place); the
    # result is built in an arena and deep-copied into wasmtime's slot.
    try:
        fn, codec = _HOST_FNS[data]
        params = codec.params
        if nargs == 1:  # store.read, store.write
            value = fn(context, params[0].lift(args))
        elif nargs == 0:
            value = fn(context)
        else:
            value = fn(context, *[c.lift(args + i * _VAL) for i, c in enumerate(params)])
        result = codec.result
        if value is OK_NONE and codec.ok_none:
            _val_clone(codec.ok_none, results)
        elif result is not None:
            arena = _scratch.host.reset()
            tmp = arena.alloc(_VAL)
            result.lower(value, arena, tmp)
            _val_clone(tmp, results)
        return 0
    except BaseException as e:  # noqa: BLE001 - must never unwind into wasmtime
        return _trap_pointer(f"gak host function failed: {type(e).__name__}: {e}")


@_finalizer_type
def _finalize(data: int) -> None:
    _HOST_FNS.pop(data or 0, None)
    _HOST_LABELS.pop(data or 0, None)


#: What each host function is, for :func:`counting` (``interface#name``).
_HOST_LABELS: dict[int, str] = {}


def add_host_func(linker_instance: Any, name: str, fn: HostFn, fty: Any, label: str = "") -> None:
    """Define ``name`` in a linker instance, dispatching to ``fn`` with the
    types of ``fty`` (the import's type, from the component) cached.
    ``label`` names it for :func:`counting` (default: ``name``)."""
    key = _next_host_fn[0]
    _next_host_fn[0] += 1
    _HOST_FNS[key] = (fn, FuncCodec(fty))
    _HOST_LABELS[key] = label or name
    raw = name.encode("utf-8")
    err = _add_func(ctypes.cast(linker_instance.ptr(), c_void_p), raw, len(raw), _dispatch, key, _finalize)
    if err:
        _HOST_FNS.pop(key, None)
        _HOST_LABELS.pop(key, None)
        raise wasmtime.WasmtimeError._from_ptr(ctypes.cast(err, ctypes.POINTER(ffi.wasmtime_error_t)))


@contextlib.contextmanager
def counting() -> Iterator["collections.Counter[str]"]:
    """Count the crossings from the component into this host — the calls
    of every host function defined here (``store.read``, ``store.write``,
    ``wasi:random``), by label — while the block runs, in every thread. For
    tests and tools: each call pays a wrapper meanwhile. (The WASI functions
    wasmtime serves itself are no crossing into Python and are not counted.)"""
    counts: collections.Counter[str] = collections.Counter()
    saved = dict(_HOST_FNS)

    def counted(fn: HostFn, label: str) -> HostFn:
        def call(*args: Any) -> Any:
            counts[label] += 1
            return fn(*args)

        return call

    for key, (fn, codec) in saved.items():
        _HOST_FNS[key] = (counted(fn, _HOST_LABELS.get(key, "?")), codec)
    try:
        yield counts
    finally:
        for key, entry in saved.items():
            if key in _HOST_FNS:
                _HOST_FNS[key] = entry


def func_address(func: Any) -> int:
    """The address of a wasmtime-py component ``Func``'s C handle."""
    return _addressof(func._func)


def context_address(store: Any) -> int:
    """The address of a store's ``wasmtime_context_t``, stable for its life."""
    return ctypes.cast(store._context(), c_void_p).value or 0
