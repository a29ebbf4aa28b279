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
import linecache
import struct
import sys
import threading
from ctypes import byref, c_char_p, c_size_t, c_void_p, string_at
from typing import Any, Callable, Iterator, Sequence

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime.component import _types as wt

from .limits import MAX_TOTAL, MAX_VALUE

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
    if argtypes:
        f.argtypes = list(argtypes)
    return f


# The calls made on every export call take no argtypes: each argument is
# passed as a ctypes object made once (c_void_p, c_size_t), which ctypes
# converts without calling from_param.
_val_clone = _fn("wasmtime_component_val_clone", None)
val_delete = _fn("wasmtime_component_val_delete", None)
# With the GIL held during an export call, the host functions it calls back
# (all Python) need not take it again. A call spends most of its time in
# those host functions anyway; SQLite and psycopg release the GIL themselves
# while they wait for I/O.
_func_call = _fn("wasmtime_component_func_call", c_void_p)

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

#: The process's (user) address space as one writable memoryview that
#: starts at address 0, so an address is its own offset: reads and writes of
#: C structs are ``struct.*_from(MEM, addr)``, with no big-int subtraction
#: per access (each one allocates: ~200 instructions, dozens per call).
#: Made as the buffer of a ctypes array at address 0 (PyMemoryView_FromMemory
#: asserts a non-NULL base in debug builds); nothing reads the first page.
MEM: memoryview = memoryview((ctypes.c_char * (1 << 47)).from_address(0)).cast("B")
#: The same memory as 8-byte words: ``MEMQ[addr >> 3]`` reads the word at
#: an 8-aligned address (every pointer and length in a Val is) with one
#: index, where an unpack costs a tuple and a call.
MEMQ: memoryview = MEM.cast("Q")

_addressof = ctypes.addressof
_c_char = ctypes.c_char

# --- CPython's own text buffers, handed over in place -----------------------
#
# What the host hands to wasmtime is only read before the call returns (an
# export's arguments, converted on entry; a host function's result, deep-
# copied by val_clone), so a `str` or `bytes` object's own buffer can be
# pointed at instead of copying its text into an arena: the caller's
# objects stay referenced (the arguments, the answer being lowered, or
# Arena.keep) until then. A compact ASCII `str` (what keys, ids and the
# component's JSON are) stores its characters, which are their UTF-8,
# right after its header; any other text is encoded to `bytes` first.

#: Offsets from ``id(obj)``: the characters of a compact ``str`` and the
#: bytes of a ``bytes`` (their header's size: ``getsizeof`` counts the NUL).
_STR_DATA = sys.getsizeof("") - 1
_BYTES_DATA = sys.getsizeof(b"") - 1
#: ``PyASCIIObject.state`` (after refcount, type, length and hash), whose
#: bits 5 and 6 say compact and ASCII: both, and the text is inline.
_STR_STATE = 32
_COMPACT_ASCII = 0x60


def _layout_holds() -> bool:
    """Whether this interpreter lays strings and bytes out as the offsets
    above say (CPython 3.11 to 3.13, the default build), checked on
    strings made at run time, an inline one and two that must not pass."""
    made = "".join(["gak", "-", str(len(sys.argv) + 12345)])
    for text in ("", made, made * 500):
        i = id(text)
        if ctypes.string_at(i + _STR_STATE, 1)[0] & _COMPACT_ASCII != _COMPACT_ASCII:
            return False
        if ctypes.string_at(i + _STR_DATA, len(text)) != text.encode():
            return False
    wide = made + "\u00e9"
    if ctypes.string_at(id(wide) + _STR_STATE, 1)[0] & _COMPACT_ASCII == _COMPACT_ASCII:
        return False

    class Sub(str):
        pass

    if ctypes.string_at(id(Sub(made)) + _STR_STATE, 1)[0] & _COMPACT_ASCII == _COMPACT_ASCII:
        return False
    data = made.encode() * 3
    return ctypes.string_at(id(data) + _BYTES_DATA, len(data)) == data


#: False on an interpreter laid out otherwise: every text is then copied
#: into the arena (what the generated code emits, and _text_ref does).
ZERO_COPY = _layout_holds()
#: :data:`_STR_STATE` as an index of :data:`MEM` from ``id(obj)``.
_STATE_AT = _STR_STATE
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

    __slots__ = (
        "chunks", "pos", "end", "first", "size", "buf", "base", "start", "keep", "slots", "c_out", "c_params",
        "answer", "c_answer", "grown", "stamp",
    )  # fmt: skip

    def __init__(self, size: int = 4096, slots: bool = False, answer: bool = False) -> None:
        self.chunks: list[bytearray] = []
        #: Whether chunks beyond the first were taken (reset drops them).
        self.grown = False
        #: Counts the calls lowered into the slots by lower_ahead: a call
        #: that lowered ahead sends its Vals only while the stamp is its own.
        self.stamp = 0
        self.pos = self.end = 0
        self._grow(size)
        #: The first chunk's address (``base`` is the current chunk's).
        self.start = self.base
        #: Objects whose buffers the values built here point into (texts
        #: encoded for the call), held until the next reset.
        self.keep: list[Any] = []
        #: With ``slots``: a call's result Val, then room for its parameter
        #: Vals, at fixed addresses, with the ctypes arguments that name
        #: them made once (a call passes them as they are).
        self.slots = 0
        self.c_out: Any = None
        self.c_params: Any = None
        if slots:
            self.slots = self.pos
            self.pos += _VAL * (1 + MAX_PARAMS)
            self.c_out = c_void_p(self.slots)
            self.c_params = c_void_p(self.slots + _VAL)
        #: With ``answer``: the block a read's answer is written into when
        #: it has the usual shape (see _ResultAnswers.lower_fast), its
        #: entropy Vals' kinds set once here.
        self.answer = 0
        self.c_answer: Any = None
        if answer:
            self.answer = self.pos
            self.pos += _ANSWER_SIZE
            e = self.answer + _ANSWER_ENTROPY
            MEM[e : e + _VAL * MAX_ENTROPY : _VAL] = _U8_KINDS[:MAX_ENTROPY]
            self.c_answer = c_void_p(self.answer)
        self.first = self.pos
        self.size = self.end - self.first

    def _grow(self, size: int) -> None:
        buf, addr = _buffer(size)
        self.chunks.append(buf)
        self.grown = len(self.chunks) > 1
        #: The chunk ``pos`` is in, and its address: bytes are copied into
        #: it by slice assignment of the same length (in place, never a
        #: resize), which costs less than slicing :data:`MEM`.
        self.buf, self.base = buf, addr
        self.pos, self.end = addr, addr + size

    def reset(self) -> "Arena":
        """Reuse the first chunk from past its slots (drops any others)."""
        if self.grown:
            del self.chunks[1:]
            self.grown = False
            self.buf, self.base = self.chunks[0], self.start
            self.end = self.first + self.size
        self.pos = self.first
        if self.keep:
            self.keep.clear()
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

    def text(self, value: Any) -> tuple[int, int]:
        """``(length, address)`` of the UTF-8 of ``value`` (a ``str``):
        its own buffer when it is compact ASCII, else an encoded copy held
        in :attr:`keep` (or, without :data:`ZERO_COPY`, in the arena)."""
        if type(value) is str and ZERO_COPY:
            i = id(value)
            if MEM[i + _STATE_AT] & _COMPACT_ASCII == _COMPACT_ASCII:
                return len(value), i + _STR_DATA
        data = _utf8(value)
        if ZERO_COPY:
            self.keep.append(data)
            return len(data), id(data) + _BYTES_DATA
        return len(data), self.copy(data)


#: The most parameters an export may have for its Vals to go in an arena's
#: slots (gak's have at most four); more are allocated per call.
MAX_PARAMS = 8


class _Scratch(threading.local):
    """Per-thread arenas, reused call after call: one for an export call's
    arguments (when the caller has none of its own: workers do), one for
    host functions' results (a host function runs while its export call's
    arguments are still in use)."""

    def __init__(self) -> None:
        self.call = Arena(slots=True)
        self.host = Arena(8192, slots=True, answer=True)


_ZERO_VAL = bytes(32)

#: Python-owned values that live as long as the process: record field names
#: and results lowered once (see FuncCodec.ok_none).
_CONSTANTS = Arena()



def _constant(data: bytes) -> tuple[int, int]:
    """``(len, address)`` of a copy of ``data`` that lives as long as the
    process (names wasmtime reads with a value it copies)."""
    return len(data), _CONSTANTS.copy(data)


class _Names(dict):  # type: ignore[type-arg]
    """Enum names by their UTF-8; a name the type does not have lifts as
    its text (as the generic lift does), never an error here."""

    def __missing__(self, key: bytes) -> str:
        return key.decode("utf-8")


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
        _put_kind_bool(MEM, at, _BOOL, value)

    def lift(self, at: int) -> Any:
        return MEM[at + _OF] != 0


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
        _put_kind_q(MEM, at, _U64_KIND, value)

    def lift(self, at: int) -> Any:
        return _Q(MEM, at + _OF)[0]


class _U8Codec(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_u8(MEM, at, _U8, _int(value, 1 << 8, "u8"))

    def lift(self, at: int) -> Any:
        return MEM[at + _OF]


class _U32Codec(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        _put_kind_u32(MEM, at, _U32_KIND, _int(value, 1 << 32, "u32"))

    def lift(self, at: int) -> Any:
        return _I(MEM, at + _OF)[0]


def _utf8(value: Any) -> bytes:
    if type(value) is not str and not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgError(f"not valid Unicode text: {e.reason}") from None


def _read_name(at: int) -> str:
    n, data = _QQ(MEM, at)
    if not n:
        return ""
    d = data
    return MEM[d : d + n].tobytes().decode("utf-8")


class _String(Codec):
    __slots__ = ()

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        n, data = arena.text(value)
        _put_kind_qq(MEM, at, _STRING, n, data)

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
            a = addr
            MEM[a : a + _VAL * n : _VAL] = bytes((_U8,)) * n
            MEM[a + _OF : a + _VAL * n : _VAL] = data
        _put_kind_qq(MEM, at, _LIST, n, addr)

    def lift(self, at: int) -> Any:
        n, data = _QQ(MEM, at + _OF)
        if not n:
            return b""
        d = data + _OF
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
        _put_kind_qq(MEM, at, _LIST, n, addr)

    def lift(self, at: int) -> Any:
        n, data = _QQ(MEM, at + _OF)
        lift = self.elem.lift
        return [lift(data + i * _VAL) for i in range(n)]


class _Record(Codec):
    __slots__ = ("names", "fields", "n", "offsets", "consts")

    def __init__(self, names: Sequence[str], fields: Sequence[Codec]) -> None:
        self.names = [n.encode("utf-8") for n in names]
        self.fields = list(fields)
        self.n = len(self.fields)
        self.offsets = [i * _ENTRY + 16 for i in range(self.n)]
        #: The field names, copied once into memory that lives as long as
        #: the process (wasmtime reads them with the value): (len, address).
        self.consts = [_constant(n) for n in self.names]

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        n = self.n
        if len(value) != n:
            raise TypeError(f"expected a record of {n} fields, got {len(value)}")
        addr = arena.alloc(_ENTRY * n)
        for i in range(n):
            entry = addr + i * _ENTRY
            _put_qq(MEM, entry, *self.consts[i])
            self.fields[i].lower(value[i], arena, entry + 16)
        _put_kind_qq(MEM, at, _RECORD, n, addr)

    def lift(self, at: int) -> Any:
        data = _QQ(MEM, at + _OF)[1]
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
        _put_kind_qq(MEM, at, _TUPLE, n, addr)

    def lift(self, at: int) -> Any:
        data = _QQ(MEM, at + _OF)[1]
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
        _put_kind_q(MEM, at, _OPTION, 0 if value is None else _boxed(self.inner, value, arena))

    def lift(self, at: int) -> Any:
        p = _Q(MEM, at + _OF)[0]
        return self.inner.lift(p) if p else None


class _Result(Codec):
    __slots__ = ("ok", "err")

    def __init__(self, ok: Codec | None, err: Codec | None) -> None:
        self.ok = ok
        self.err = err

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        is_ok, payload = value
        codec = self.ok if is_ok else self.err
        _put_kind_result(MEM, at, _RESULT, bool(is_ok), 0 if codec is None else _boxed(codec, payload, arena))

    def lift(self, at: int) -> Any:
        a = at + _OF
        is_ok = MEM[a] != 0
        codec = self.ok if is_ok else self.err
        if codec is None:
            return (is_ok, None)
        return (is_ok, codec.lift(_Q(MEM, a + 8)[0]))


class _Variant(Codec):
    __slots__ = ("cases", "consts")

    def __init__(self, cases: Sequence[tuple[str, Codec | None]]) -> None:
        self.cases = {name: (name.encode("utf-8"), codec) for name, codec in cases}
        self.consts = {name: _constant(b) for name, (b, _) in self.cases.items()}

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        tag, payload = value
        case = self.cases.get(tag)
        if case is None:
            raise ArgError(f"{tag!r} is not a case of this variant")
        codec = case[1]
        boxed = 0 if codec is None else _boxed(codec, payload, arena)
        _put_kind_variant(MEM, at, _VARIANT, *self.consts[tag], boxed)

    def lift(self, at: int) -> Any:
        tag = _read_name(at + _OF)
        codec = self.cases[tag][1]
        if codec is None:
            return (tag, None)
        return (tag, codec.lift(_Q(MEM, at + _OF + 16)[0]))


class _Enum(Codec):
    __slots__ = ("names", "by_shape", "consts", "by_bytes")

    def __init__(self, names: Sequence[str]) -> None:
        self.names = {n: n.encode("utf-8") for n in names}
        # Lifting reads two bytes instead of decoding the name when (length,
        # first byte, last byte) tells the cases apart (true of every gak enum).
        shapes = {(len(b), b[0], b[-1]): n for n, b in self.names.items()}
        self.by_shape = shapes if len(shapes) == len(self.names) else None
        #: Each name's (len, address), lowered once for the process.
        self.consts = {n: _constant(b) for n, b in self.names.items()}
        #: Names by their UTF-8, for generated lifting (see _compile_lift).
        self.by_bytes = _Names({b: n for n, b in self.names.items()})

    def lower(self, value: Any, arena: Arena, at: int) -> None:
        name = self.consts.get(value) if isinstance(value, str) else None
        if name is None:
            raise ArgError(f"{value!r} is not one of {sorted(self.names)}")
        _put_kind_qq(MEM, at, _ENUM, *name)

    def lift(self, at: int) -> Any:
        if self.by_shape is not None:
            n, data = _QQ(MEM, at + _OF)
            d = data
            name = self.by_shape.get((n, MEM[d], MEM[d + n - 1])) if n else None
            if name is not None:
                return name
        return _read_name(at + _OF)


# --- generated lifting and lowering -----------------------------------------
#
# A codec tree walked per value costs a Python call per node and a `struct`
# call per field. Each export's result and parameters are instead compiled
# once into one Python function of straight-line code: a record's entries
# are read with ONE `unpack_from` (every field's payload at once), its
# texts decoded in place, and the parameters written with ONE `pack_into`
# (with the result slot's kind, which must be zero before wasmtime assigns
# it). What the generated code does not handle it hands to the codec
# objects above (lowering: the whole call falls back to them when a value
# is not of the exact type the fast path expects, so every error is theirs).


class _Texts(dict):  # type: ignore[type-arg]
    """``struct`` unpackers of ``n`` bytes by ``n`` (cached up to
    :data:`_SHORT`: unpacking costs less than slicing :data:`MEM`)."""

    def __missing__(self, n: int) -> Callable[..., tuple[bytes]]:
        if n > _SHORT:
            return lambda mem, off: (mem[off : off + n].tobytes(),)
        f = self[n] = struct.Struct(f"{n}s").unpack_from
        return f


_SHORT = 4096
_TEXTS = _Texts()
_TEXTS[0] = lambda mem, off: (b"",)


class _Gen:
    """Python source of generated functions, with the names they use."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"MEM": MEM, "MEMQ": MEMQ, "TX": _TEXTS, "range": range, "map": map, "list": list}
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: Any, prefix: str = "k") -> str:
        n = self.name(prefix)
        self.ns[n] = value
        return n

    def define(self, name: str, lines: list[str]) -> Callable[..., Any]:
        src = "\n".join(lines) + "\n"
        _Gen.made += 1
        filename = f"<gak._abi generated {_Gen.made}: {name}>"
        # Tracebacks and inspect.getsource show the generated lines.
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        exec(compile(src, filename, "exec"), self.ns)  # noqa: S102 - source built here from types
        fn: Callable[..., Any] = self.ns[name]
        return fn

    made = 0


#: Each payload (the 24 bytes after a Val's kind) as a struct format and
#: the number of values it unpacks to.
def _payload(codec: Codec) -> tuple[str, int]:
    if isinstance(codec, _Bool):
        return "?23x", 1
    if isinstance(codec, _U8Codec):
        return "B23x", 1
    if isinstance(codec, _U32Codec):
        return "I20x", 1
    if isinstance(codec, _U64Codec):
        return "Q16x", 1
    if isinstance(codec, _Option):
        return "Q16x", 1
    if isinstance(codec, _Result):
        return "?7xQ8x", 2
    if isinstance(codec, _Variant):
        return "QQQ", 3
    # string, enum, bytes, list, record, tuple: (length or count, address)
    return "QQ8x", 2


class _NotGenerated(Exception):
    """A type the generated lifting does not read (the store's own types,
    which are never in an export's result): its codec's ``lift`` is used."""


class Make:
    """Shape (see :meth:`FuncCodec.shaped`) of a record: built by
    ``make(*fields)`` instead of as a tuple, each field shaped by
    ``fields[i]`` when given.

    With ``names`` (the record's WIT field names, in the order ``make``
    and ``fields`` take them; what :mod:`gak._wire` passes) the fields are
    matched by name when the lift is generated: whatever order the
    component's record has, ``make`` gets each field where it expects it,
    and a record whose names differ is refused then, never lifted into the
    wrong fields."""

    def __init__(
        self, make: Callable[..., Any], fields: Sequence[Any] = (), names: Sequence[str] | None = None
    ) -> None:
        self.make = make
        self.fields = list(fields)
        self.names = None if names is None else [n.encode("utf-8") for n in names]


class EnumAs:
    """Shape of an enum: its cases as members of ``cls`` (a name ``cls``
    does not have raises what ``cls(name)`` raises)."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls


class Cases:
    """Shape of a variant: case ``tag`` built by ``make(payload)`` (or
    ``make()`` without one), its payload shaped by ``payload``."""

    def __init__(self, cases: dict[str, tuple[Callable[..., Any], Any]]) -> None:
        self.cases = cases


class Ok:
    """Shape of a ``result``: its ``ok`` payload shaped (``err`` as is)."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape


class _Members(dict):  # type: ignore[type-arg]
    """An enum's members by their name's UTF-8 (see :class:`EnumAs`)."""

    def __init__(self, cls: Any, names: Sequence[bytes]) -> None:
        super().__init__({b: cls(b.decode("utf-8")) for b in names})
        self.cls = cls

    def __missing__(self, key: bytes) -> Any:
        return self.cls(key.decode("utf-8"))


def _field(shape: Any, i: int) -> Any:
    return shape.fields[i] if isinstance(shape, Make) and i < len(shape.fields) else None


def _make_order(codec: Any, shape: Any) -> list[int]:
    """For each argument of ``shape.make``, the index of the record's field
    it is: by name when the shape names its fields, else by position."""
    n = len(codec.fields)
    if not isinstance(shape, Make) or shape.names is None:
        return list(range(n))
    if sorted(shape.names) != sorted(codec.names):
        have = ", ".join(b.decode() for b in codec.names)
        want = ", ".join(b.decode() for b in shape.names)
        raise TypeError(f"the component's record has fields ({have}), this package's ({want}): regenerate it")
    return [codec.names.index(name) for name in shape.names]


def _lift_expr(g: _Gen, codec: Codec, v: list[str], shape: Any = None) -> str:
    """An expression of the value whose payload unpacked to names ``v``
    (built as ``shape`` says, when given)."""
    t = type(codec)
    if t in (_Bool, _U8Codec, _U32Codec, _U64Codec):
        return v[0]
    if t is _String:
        return f"TX[{v[0]}](MEM, {v[1]})[0].decode()"
    if t is _Enum:
        names = codec.by_bytes if not isinstance(shape, EnumAs) else _Members(shape.cls, list(codec.by_bytes))  # type: ignore[attr-defined]
        return f"{g.const(names, 'names')}[TX[{v[0]}](MEM, {v[1]})[0]]"
    if t is _Bytes:
        a = f"{v[1]} + {_OF}"
        return f"(MEM[{a} : {a} + {_VAL} * {v[0]} : {_VAL}].tobytes() if {v[0]} else b'')"
    if t is _Option:
        return f"({_lift_at(g, codec.inner, v[0], shape)} if {v[0]} else None)"  # type: ignore[attr-defined]
    if t in (_Result, _ResultAnswers):
        inner = shape.shape if isinstance(shape, Ok) else None
        ok = "None" if codec.ok is None else _lift_at(g, codec.ok, v[1], inner)  # type: ignore[attr-defined]
        err = "None" if codec.err is None else _lift_at(g, codec.err, v[1])  # type: ignore[attr-defined]
        return f"((True, {ok}) if {v[0]} else (False, {err}))"
    if t in (_Record, _Tuple):
        return f"{g.const(_compile_block(g, codec, shape), 'block')}({v[1]})"
    if t is _List:
        f = g.const(_compile_lift(codec.elem, g, shape), "lift")  # type: ignore[attr-defined]
        return f"(list(map({f}, range({v[1]}, {v[1]} + {_VAL} * {v[0]}, {_VAL}))) if {v[0]} else [])"
    if t is _Variant:
        return f"{g.const(_compile_variant(g, codec, shape), 'variant')}({v[0]}, {v[1]}, {v[2]})"
    raise _NotGenerated(t.__name__)


def _compile_variant(g: _Gen, codec: Any, shape: Any = None) -> Callable[[int, int, int], Any]:
    """The lift of a variant from its payload's three words (name length,
    name, the case's Val): the case by its name's bytes, its payload by
    generated code; ``(tag, payload)``, or what :class:`Cases` builds. A
    name the type does not have is the generic lift's KeyError."""
    fn = g.name("variant")
    if isinstance(shape, Cases):
        made = {}
        for tag, (b, c) in codec.cases.items():
            make, inner = shape.cases[tag]
            made[b] = (make, None if c is None else _compile_lift(c, g, inner))
        lines = [
            f"def {fn}(n, name, at):",
            f"    make, lift = {g.const(made, 'cases')}[TX[n](MEM, name)[0]]",
            "    return make() if lift is None else make(lift(at))",
        ]
        return g.define(fn, lines)
    cases = {b: (tag, None if c is None else _compile_lift(c, g)) for tag, (b, c) in codec.cases.items()}
    lines = [
        f"def {fn}(n, name, at):",
        f"    tag, lift = {g.const(cases, 'cases')}[TX[n](MEM, name)[0]]",
        "    return (tag, None if lift is None else lift(at))",
    ]
    return g.define(fn, lines)


def _lift_at(g: _Gen, codec: Codec, at: str, shape: Any = None) -> str:
    """An expression of the value of the Val at address ``at`` (a name)."""
    t = type(codec)
    if t is _String:
        return f"TX[MEMQ[({at} >> 3) + 1]](MEM, MEMQ[({at} >> 3) + 2])[0].decode()"
    if t is _U64Codec:
        return f"MEMQ[({at} >> 3) + 1]"
    if t in (_Record, _Tuple):
        return f"{g.const(_compile_block(g, codec, shape), 'block')}(MEMQ[({at} >> 3) + 2])"
    return f"{g.const(_compile_lift(codec, g, shape), 'lift')}({at})"


def _compile_block(g: _Gen, codec: Any, shape: Any = None) -> Callable[[int], Any]:
    """The lift of a record's entries (or a tuple's Vals) at an address:
    every field's payload with one unpack; a tuple, or what :class:`Make`
    builds."""
    record = type(codec) is _Record
    fields = codec.fields if record else codec.elems
    skip = "24x" if record else "8x"  # entry: name, then the Val's kind; Val: kind
    # The field each argument of the shape's make is (by name where the
    # shape names them), and each field's place among them.
    order = _make_order(codec, shape) if record else list(range(len(fields)))
    place = {j: i for i, j in enumerate(order)}
    fmt, names, exprs = "<", [], [""] * len(fields)
    for j, f in enumerate(fields):
        pay, k = _payload(f)
        fmt += skip + pay
        v = [g.name("f") for _ in range(k)]
        names += v
        exprs[place[j]] = _lift_expr(g, f, v, _field(shape, place[j]))
    unpack = g.const(struct.Struct(fmt).unpack_from, "unpack")
    fn = g.name("block")
    lines = [f"def {fn}(at):"]
    if names:
        lines.append(f"    {', '.join(names)}, = {unpack}(MEM, at)")
    if isinstance(shape, Make):
        lines.append(f"    return {g.const(shape.make, 'make')}({', '.join(exprs)})")
    else:
        lines.append(f"    return ({', '.join(exprs)}{',' if len(exprs) == 1 else ''})")
    return g.define(fn, lines)


def _compile_lift(codec: Codec, g: _Gen | None = None, shape: Any = None) -> Callable[[int], Any]:
    """The lift of a Val at an address as one generated function; the
    codec's own ``lift`` for a type generated code does not read."""
    top = g is None
    g = g or _Gen()
    g.ns.setdefault("_QQ", _QQ)
    g.ns.setdefault("_Q", _Q)
    try:
        pay, k = _payload(codec)
        v = [g.name("p") for _ in range(k)]
        expr = _lift_expr(g, codec, v, shape)
    except _NotGenerated:
        if not top or shape is not None:
            raise
        return codec.lift
    unpack = g.const(struct.Struct("<" + pay).unpack_from, "unpack")
    fn = g.name("lift")
    lines = [
        f"def {fn}(at):",
        f"    {', '.join(v)}, = {unpack}(MEM, at + {_OF})",
        f"    return {expr}",
    ]
    return g.define(fn, lines)


class _Lowering:
    """Statements of a generated lowering, and the values of the pack that
    writes a block of Vals (see _compile_lower)."""

    def __init__(self, g: _Gen, bound: int | None = None) -> None:
        self.g = g
        self.lines: list[str] = []
        #: The longest text taken (``None``: any); how many texts there are.
        self.bound = bound
        self.texts = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def alloc(self, name: str, n: int, indent: str = "") -> None:
        """``name = arena.alloc(n)``, inline while the chunk has room."""
        n = (n + 7) & ~7
        self.emit(f"{indent}{name} = arena.pos")
        self.emit(f"{indent}if {name} + {n} > arena.end:")
        self.emit(f"{indent}    {name} = arena.alloc({n})")
        self.emit(f"{indent}else:")
        self.emit(f"{indent}    arena.pos = {name} + {n}")

    def text(self, var: str) -> tuple[str, str]:
        """Statements putting ``var``'s UTF-8 (length, address) in two names;
        ``return None`` (the slow path) for anything but a ``str``."""
        n, p, i = self.g.name("n"), self.g.name("p"), self.g.name("i")
        self.emit(f"if type({var}) is not str:")
        self.emit("    return None")
        if ZERO_COPY:
            self.emit(f"{i} = id({var})")
            self.emit(f"if MEM[{i} + {_STATE_AT}] & {_COMPACT_ASCII} == {_COMPACT_ASCII}:")
            self.emit(f"    {n} = len({var})")
            self.emit(f"    {p} = {i} + {_STR_DATA}")
            self.emit("else:")
            self.emit(f"    {i} = _encoded({var})")
            self.emit(f"    if {i} is None:")
            self.emit("        return None")
            self.emit(f"    arena.keep.append({i})")
            self.emit(f"    {n} = len({i})")
            self.emit(f"    {p} = id({i}) + {_BYTES_DATA}")
        else:
            self.emit(f"{i} = _encoded({var})")
            self.emit(f"if {i} is None:")
            self.emit("    return None")
            self.emit(f"{n} = len({i})")
            self.emit(f"{p} = arena.copy({i})")
        self.texts += 1
        if self.bound is not None:
            self.emit(f"if {n} > {self.bound}:")
            self.emit("    return None")
        return n, p

    def val(self, codec: Codec, var: str, posts: list[tuple[int, str, str]], at: int) -> tuple[str, list[str]]:
        """The struct format and values of the Val of ``var`` (32 bytes),
        after statements computing them. A type generated code does not
        write is zeros here and its codec's ``lower`` afterwards (appended
        to ``posts`` as (offset in the block, codec, value))."""
        g = self.g
        if isinstance(codec, _String):
            n, p = self.text(var)
            return "B7xQQ8x", [str(_STRING), n, p]
        if isinstance(codec, (_U64Codec, _U32Codec, _U8Codec)):
            bound, kind, fmt = {
                _U64Codec: (1 << 64, _U64_KIND, "B7xQ16x"),
                _U32Codec: (1 << 32, _U32_KIND, "B7xI20x"),
                _U8Codec: (1 << 8, _U8, "B7xB23x"),
            }[type(codec)]
            self.emit(f"if type({var}) is not int or not 0 <= {var} < {bound}:")
            self.emit("    return None")
            return fmt, [str(kind), var]
        if isinstance(codec, _Bool):
            self.emit(f"if {var} is not True and {var} is not False:")
            self.emit("    return None")
            return "B7x?23x", [str(_BOOL), var]
        if isinstance(codec, _Enum):
            c = g.name("c")
            self.emit(f"{c} = {g.const(codec.consts, 'enum')}.get({var}) if type({var}) is str else None")
            self.emit(f"if {c} is None:")
            self.emit("    return None")
            return "B7xQQ8x", [str(_ENUM), f"{c}[0]", f"{c}[1]"]
        if isinstance(codec, _Option):
            q = g.name("q")
            self.emit(f"if {var} is None:")
            self.emit(f"    {q} = 0")
            self.emit("else:")
            inner = _Lowering(g, self.bound)
            inner_posts: list[tuple[int, str, str]] = []
            fmt, vals = inner.val(codec.inner, var, inner_posts, 0)
            self.texts += inner.texts
            posts += [(-1, "", "")] * len(inner_posts)  # counted: their sizes are not bounded here
            self.lines += ["    " + line for line in inner.lines]  # under the else
            self.alloc(q, _VAL, "    ")
            self.emit(f"    {g.const(struct.Struct('<' + fmt).pack_into, 'pack')}(MEM, {q}, {', '.join(vals)})")
            for off, c, v in inner_posts:
                if c:
                    self.emit(f"    {c}.lower({v}, arena, {q} + {off})")
            return "B7xQ16x", [str(_OPTION), q]
        if type(codec) in (_Record, _Tuple):
            fields = codec.fields if isinstance(codec, _Record) else codec.elems
            k = len(fields)
            self.emit(f"if type({var}) is not tuple or len({var}) != {k}:")
            self.emit("    return None")
            names = [g.name("r") for _ in range(k)]
            self.emit(f"{', '.join(names)}{',' if k == 1 else ''} = {var}")
            fmt, vals, inner_posts = "<", [], []
            size = _ENTRY if isinstance(codec, _Record) else _VAL
            for j, (f, name) in enumerate(zip(fields, names)):
                if isinstance(codec, _Record):
                    ln, addr = codec.consts[j]
                    fmt += "QQ"
                    vals += [str(ln), str(addr)]
                off = j * size + (16 if isinstance(codec, _Record) else 0)
                ffmt, fvals = self.val(f, name, inner_posts, off)
                fmt += ffmt
                vals += fvals
            e = g.name("e")
            self.alloc(e, size * k)
            self.emit(f"{g.const(struct.Struct(fmt).pack_into, 'pack')}(MEM, {e}, {', '.join(vals)})")
            for off, c, v in inner_posts:
                if c:
                    self.emit(f"{c}.lower({v}, arena, {e} + {off})")
            posts += [(-1, "", "")] * len(inner_posts)  # counted: their sizes are not bounded here
            return "B7xQQ8x", [str(_RECORD if isinstance(codec, _Record) else _TUPLE), str(k), e]
        # bytes, lists, results, variants: their codec, after the pack.
        posts.append((at, g.const(codec, "codec"), var))
        return "32x", []


def _encoded(value: str) -> bytes | None:
    """``value``'s UTF-8, or ``None`` when it has none (lone surrogates:
    the slow path then raises the codecs' ArgError)."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _compile_lower(params: Sequence[Codec]) -> tuple[Callable[[Sequence[Any], Arena], Any] | None, bool]:
    """The lowering of an export's arguments into an arena's parameter
    slots, every parameter Val written with ONE pack (the result slot
    before them is left alone: it holds the last result, which wasmtime
    drops when it assigns the next). The function returns ``None`` when an
    argument is not what the fast path takes (the caller then lowers with
    the codecs, which raise the errors) or a text is longer than
    :data:`gak.limits.MAX_VALUE`.

    Also returns whether the lowering bounds every size :func:`gak.limits.
    oversized` would (no lists or bytes, few enough texts that their total
    cannot pass :data:`gak.limits.MAX_TOTAL`): then a call it takes needs
    no other size check."""
    n = len(params)
    if n > MAX_PARAMS:
        return None, False
    g = _Gen()
    g.ns["_encoded"] = _encoded
    low = _Lowering(g, MAX_VALUE)
    args = [g.name("a") for _ in range(n)]
    low.emit(f"if len(args) != {n}:")
    low.emit("    return None")
    if n:
        low.emit(f"{', '.join(args)}{',' if n == 1 else ''} = args")
    fmt, vals, posts = "<", [], []
    for i, (codec, a) in enumerate(zip(params, args)):
        f, v = low.val(codec, a, posts, _VAL * i)
        fmt += f
        vals += v
    if vals:
        low.emit(f"{g.const(struct.Struct(fmt).pack_into, 'pack')}(MEM, arena.slots + {_VAL}, {', '.join(vals)})")
    for off, c, v in posts:
        if c:
            low.emit(f"{c}.lower({v}, arena, arena.slots + {_VAL + off})")
    low.emit("return True")
    checks = not posts and low.texts * MAX_VALUE <= MAX_TOTAL
    return g.define("lower", ["def lower(args, arena):"] + low.lines), checks


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


def _text(n: int, data: int) -> str:
    """The UTF-8 text at ``data`` (the component's own, so valid)."""
    return _TEXTS[n](MEM, data)[0].decode()


#: Unpackers of the second payload word of ``n`` consecutive Vals (a list's
#: records' or tuples' element pointers), by ``n``: one unpack per list.
_WORDS: dict[int, Callable[..., tuple[int, ...]]] = {}


def _second_words(n: int) -> Callable[..., tuple[int, ...]]:
    f = _WORDS.get(n)
    if f is None:
        f = struct.Struct("<" + "16xQ8x" * n).unpack_from
        if n <= 64:
            _WORDS[n] = f
    return f


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
            found = self.by_first.get((n << 8) | MEM[data])
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
        entries = MEMQ[(at >> 3) + 2]
        nk, keys, nr, ranges, clock, entropy = _reads_fields(MEM, entries)
        table = self.table
        first = table.by_first.get
        tx = _TEXTS
        pairs = []
        if nk == 1:  # a claim's read, and many others: no list of pointers
            tl, td, kl, kd = _pair_fields(MEM, MEMQ[(keys >> 3) + 2])
            pairs.append((first((tl << 8) | MEM[td]) or table.name(tl, td), tx[kl](MEM, kd)[0].decode()))
        elif nk:
            # Each key is a tuple Val: its payload is (2, elements).
            for elems in _second_words(nk)(MEM, keys):
                tl, td, kl, kd = _pair_fields(MEM, elems)
                pairs.append((first((tl << 8) | MEM[td]) or table.name(tl, td), tx[kl](MEM, kd)[0].decode()))
        if not nr:
            return (pairs, [], clock, entropy)
        spans = []
        if nr:
            for fields in _second_words(nr)(MEM, ranges):
                tl, td, pl, pd, after, limit = _range_fields(MEM, fields)
                t = first((tl << 8) | MEM[td]) or table.name(tl, td)
                if after:
                    al, ad = _QQ(MEM, after + _OF)
                    spans.append((t, tx[pl](MEM, pd)[0].decode(), tx[al](MEM, ad)[0].decode(), limit))
                else:
                    spans.append((t, tx[pl](MEM, pd)[0].decode(), None, limit))
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
        n, data = _QQ(MEM, at + _OF)
        if not n:
            return []
        table = self.table
        first = table.by_first.get
        tx = _TEXTS
        out = []
        for fields in _second_words(n)(MEM, data):
            tl, td, kl, kd, value = _change_fields(MEM, fields)
            t = first((tl << 8) | MEM[td]) or table.name(tl, td)
            if value:
                v = (value >> 3) + 1
                out.append((t, tx[kl](MEM, kd)[0].decode(), tx[MEMQ[v]](MEM, MEMQ[v + 1])[0].decode()))
            else:
                out.append((t, tx[kl](MEM, kd)[0].decode(), None))
        return out


class _ResultAnswers(_Result):
    """``result<answers, store-error>``: ``ok((values, pages, now,
    entropy))`` written as one block of Vals (the record and its entries
    with one ``pack_into``), the texts after it. ``err`` and lifting are the
    generic result's."""

    __slots__ = ("consts",)

    def __init__(self, ok: Codec, err: Codec | None) -> None:
        super().__init__(ok, err)
        if not isinstance(ok, _Record):
            raise TypeError("answers: expected a record")
        self.consts = ok.consts

    def lower_fast(self, value: Any, arena: Arena) -> Any:
        """Lower a read's answer into ``arena`` (one with an answer block)
        and return the ctypes address of its Val: the usual answer (no
        range pages, a few values, the entropy as bytes) with ONE pack into
        the arena's answer block, any other through :meth:`lower`."""
        if value[0]:
            values, pages, now, entropy = value[1]
            nv = len(values)
            if not pages and nv < len(_ANSWERS) and type(entropy) is bytes and len(entropy) <= MAX_ENTROPY:
                if _ANSWERS[nv](arena.answer, values, now, entropy, arena, self.consts):
                    return arena.c_answer
        self.lower(value, arena, arena.slots)
        return arena.c_out

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
                _put_kind_q(MEM, opts + i * _VAL, _OPTION, 0)
                continue
            # A compact ASCII str is handed over in place (Arena.text, inline).
            if type(v) is str and ZERO_COPY and MEM[id(v) + _STATE_AT] & _COMPACT_ASCII == _COMPACT_ASCII:
                n, p = len(v), id(v) + _STR_DATA
            else:
                n, p = arena.text(v)
            s = strs + i * _VAL
            _put_option_string(MEM, opts + i * _VAL, _OPTION, s)
            _put_kind_qq(MEM, s, _STRING, n, p)
        for j in range(np_):
            _lower_page(pages[j], arena, lists + j * _VAL)
        if now is None:
            now_ptr = 0
        else:
            if type(now) is not int or not 0 <= now < _U64_BOUND:
                now = _int(now, _U64_BOUND, "u64")
            _put_kind_q(MEM, clock, _U64_KIND, now)
            now_ptr = clock
        if not isinstance(entropy, (bytes, bytearray)):
            raise TypeError(f"expected bytes, got {type(entropy).__name__}")
        ne = len(entropy)
        bytes_ptr = 0
        if ne:
            bytes_ptr = arena.alloc(_VAL * ne)
            a = bytes_ptr
            MEM[a : a + _VAL * ne : _VAL] = _U8_KINDS[:ne]
            MEM[a + _OF : a + _VAL * ne : _VAL] = entropy
        (l0, p0), (l1, p1), (l2, p2), (l3, p3) = self.consts
        _put_answers(
            MEM,
            block,
            _RECORD, 4, entries,
            l0, p0, _LIST, nv, opts if nv else 0,
            l1, p1, _LIST, np_, lists if np_ else 0,
            l2, p2, _OPTION, now_ptr,
            l3, p3, _LIST, ne, bytes_ptr,
        )  # fmt: skip
        _put_kind_result(MEM, at, _RESULT, True, block)


#: The most entropy one read may ask for (WIT ``store.reads.entropy``).
MAX_ENTROPY = 64

# The answer block (Arena.answer): the result Val, the record Val, its four
# entries, room for the option and string Vals of _ANSWER_VALUES values,
# the clock's Val, then the entropy's u8 Vals (kinds set once).
_ANSWER_VALUES = 4
_ANSWER_RECORD = _VAL
_ANSWER_ENTRIES = 2 * _VAL
_ANSWER_OPTS = _ANSWER_ENTRIES + 4 * _ENTRY
_ANSWER_STRS = _ANSWER_OPTS + _VAL * _ANSWER_VALUES
_ANSWER_CLOCK = _ANSWER_STRS + _VAL * _ANSWER_VALUES
_ANSWER_ENTROPY = _ANSWER_CLOCK + _VAL
_ANSWER_SIZE = _ANSWER_ENTROPY + _VAL * MAX_ENTROPY


def _compile_answer(nv: int) -> Callable[..., Any]:
    """The lowering of an answer of ``nv`` values into an answer block at
    ``b``: everything but the entropy bytes with one pack. ``None`` (then
    the codec lowers it) for a value or clock the fast path does not take."""
    g = _Gen()
    g.ns["_encoded"] = _encoded
    low = _Lowering(g)
    vals = [g.name("v") for _ in range(nv)]
    if nv:
        low.emit(f"{', '.join(vals)}, = values")
    opts, strs = [], []
    for i, v in enumerate(vals):
        o, n, p = g.name("o"), g.name("n"), g.name("p")
        low.emit(f"if {v} is None:")
        low.emit(f"    {o} = {n} = {p} = 0")
        low.emit("else:")
        inner = _Lowering(g)
        tn, tp = inner.text(v)
        low.lines += ["    " + line for line in inner.lines]
        low.emit(f"    {n}, {p} = {tn}, {tp}")
        low.emit(f"    {o} = b + {_ANSWER_STRS + i * _VAL}")
        opts += [str(_OPTION), o]
        strs += [str(_STRING), n, p]
    low.emit("if now is None:")
    low.emit("    at = now = 0")
    low.emit(f"elif type(now) is int and 0 <= now < {1 << 64}:")
    low.emit(f"    at = b + {_ANSWER_CLOCK}")
    low.emit("else:")
    low.emit("    return None")
    low.emit("ne = len(entropy)")
    low.emit(f"e = b + {_ANSWER_ENTROPY}")
    low.emit("if ne:")
    low.emit(f"    MEM[e + {_OF} : e + {_OF} + {_VAL} * ne : {_VAL}] = entropy")
    low.emit("(l0, p0), (l1, p1), (l2, p2), (l3, p3) = names")
    fmt = (
        "<B7x?7xQ8x"  # the result: ok, the record
        "B7xQQ8x"  # the record: 4 entries
        "QQB7xQQ8x"  # values: list of nv options
        "QQB7xQQ8x"  # pages: empty list
        "QQB7xQ16x"  # now: option
        "QQB7xQQ8x"  # entropy: list of ne u8
        + "B7xQ16x" * nv
        + "32x" * (_ANSWER_VALUES - nv)
        + "B7xQQ8x" * nv
        + "32x" * (_ANSWER_VALUES - nv)
        + "B7xQ16x"  # the clock
    )
    args = [
        str(_RESULT), "True", f"b + {_ANSWER_RECORD}",
        str(_RECORD), "4", f"b + {_ANSWER_ENTRIES}",
        "l0", "p0", str(_LIST), str(nv), f"b + {_ANSWER_OPTS}" if nv else "0",
        "l1", "p1", str(_LIST), "0", "0",
        "l2", "p2", str(_OPTION), "at",
        "l3", "p3", str(_LIST), "ne", "e if ne else 0",
        *opts, *strs,
        str(_U64_KIND), "now",
    ]  # fmt: skip
    low.emit(f"{g.const(struct.Struct(fmt).pack_into, 'pack')}(MEM, b, {', '.join(args)})")
    low.emit("return True")
    return g.define("answer", ["def answer(b, values, now, entropy, arena, names):"] + low.lines)


_ANSWERS = [_compile_answer(nv) for nv in range(_ANSWER_VALUES + 1)]


def _lower_page(page: Any, arena: Arena, at: int) -> None:
    """One ``list<tuple<string, string>>`` into the Val at ``at``: the tuple
    Vals, then each tuple's two string Vals."""
    if not isinstance(page, (list, tuple)):
        raise TypeError(f"expected a list, got {type(page).__name__}")
    m = len(page)
    if not m:
        _put_kind_qq(MEM, at, _LIST, 0, 0)
        return
    tuples = arena.alloc(3 * _VAL * m)
    pairs = tuples + _VAL * m
    text = arena.text
    for k in range(m):
        key, value = page[k]
        kn, kp = text(key)
        vn, vp = text(value)
        p = pairs + 2 * _VAL * k
        _put_kind_qq(MEM, tuples + k * _VAL, _TUPLE, 2, p)
        _put_pair(MEM, p, _STRING, kn, kp, _STRING, vn, vp)
    _put_kind_qq(MEM, at, _LIST, m, tuples)


_put_pair = struct.Struct("<B7xQQ8xB7xQQ8x").pack_into
_put_option_string = _put_kind_q
#: The kind byte of as many u8 Vals as an answer's entropy has bytes.
_U8_KINDS = bytes((_U8,)) * 256

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
    """Parameter and result codecs of one component function, and the
    generated code that lowers its arguments and lifts its result."""

    __slots__ = (
        "params", "result", "arity", "names", "ok_none", "c_ok_none", "c_arity", "lower_args", "lift_result",
        "lift_arg", "lower_result", "checks_sizes",
    )  # fmt: skip

    def __init__(self, fty: Any) -> None:
        params = fty.params
        self.names = [n for n, _ in params]
        self.params = [codec_of(t) for _, t in params]
        result = fty.result
        self.result = codec_of(result) if result is not None else None
        self.arity = len(self.params)
        self.c_arity = c_size_t(self.arity)
        #: An export's arguments into an arena's slots (None: the codecs),
        #: and whether what it takes is within every size limit.
        self.lower_args, self.checks_sizes = _compile_lower(self.params)
        self.lift_result = _compile_lift(self.result) if self.result is not None else None
        #: A host function's one parameter (store.read, store.write).
        self.lift_arg = _compile_lift(self.params[0]) if self.arity == 1 else None
        #: A host function's result into a host arena: the ctypes address
        #: of the Val to hand over.
        self.lower_result = self.result.lower_fast if isinstance(self.result, _ResultAnswers) else self._lower_result
        # A frequent host result, lowered once: `store.write` answers it
        # every time it succeeds.
        self.ok_none = 0
        self.c_ok_none: Any = None
        r = self.result
        if isinstance(r, _Result) and r.ok is None:
            self.ok_none = _CONSTANTS.alloc(_VAL)
            r.lower(OK_NONE, _CONSTANTS, self.ok_none)
            self.c_ok_none = c_void_p(self.ok_none)


    def shaped(self, shape: Any) -> "FuncCodec":
        """This codec with a result lift that builds what ``shape`` says
        (:class:`Ok`, :class:`Make`, :class:`EnumAs`, :class:`Cases`,
        applied where the type has them) instead of tuples and strings:
        the API's dataclasses straight from the Vals."""
        other = FuncCodec.__new__(FuncCodec)
        for slot in FuncCodec.__slots__:
            setattr(other, slot, getattr(self, slot))
        other.lift_result = _compile_lift(self.result, shape=shape)  # type: ignore[arg-type]
        return other

    def _lower_result(self, value: Any, arena: Arena) -> Any:
        self.result.lower(value, arena, arena.slots)  # type: ignore[union-attr]
        return arena.c_out


def _error(ptr: int) -> str:
    return str(wasmtime.WasmtimeError._from_ptr(ctypes.cast(ptr, ctypes.POINTER(ffi.wasmtime_error_t))))


_ONE = c_size_t(1)
_NONE_OUT = c_size_t(0)


def call(func_ptr: int, context: int, codec: FuncCodec, args: Sequence[Any]) -> Any:
    """Call an exported function by addresses, with this thread's arena
    (for tests and tools; workers call :func:`call_export`)."""
    return call_export(c_void_p(func_ptr), c_void_p(context), codec, args, _scratch.call)


def call_export(c_func: Any, c_context: Any, codec: FuncCodec, args: Sequence[Any], arena: Arena) -> Any:
    """Call an exported function: lower ``args``, call, lift the result.
    ``c_func`` and ``c_context`` are ``c_void_p`` made once; ``arena`` has
    slots and is not in use by another call.

    Raises :class:`ArgError` / ``TypeError`` before entering wasm when an
    argument cannot be lowered (nothing ran), and :class:`Trap` when the call
    itself failed (the instance must then be discarded).
    """
    if arena.grown or arena.keep:
        arena.reset()
    else:
        arena.pos = arena.first  # reset, inline
    lower = codec.lower_args
    if lower is not None and lower(args, arena):
        c_params = arena.c_params if codec.arity else None
    else:
        c_params = _lower_with_codecs(codec, args, arena)
    return call_lowered(c_func, c_context, codec, c_params, arena)


def call_lowered(c_func: Any, c_context: Any, codec: FuncCodec, c_params: Any, out: Arena) -> Any:
    """Call an exported function whose arguments are lowered at
    ``c_params``, its result assigned to ``out``'s result slot.

    The slot keeps the result after it is lifted: wasmtime drops what the
    slot holds when it assigns the next one (as a ``val_delete`` would, a
    ctypes call fewer per call); :func:`release_result` frees the last."""
    # ctypes converts arguments fastest with no argtypes and every argument
    # a ctypes object made once (argtypes cost ~5,000 instructions a call).
    if codec.result is None:
        err = _func_call(c_func, c_context, c_params, codec.c_arity, None, _NONE_OUT)
        if err:
            raise Trap(_error(err))
        return None
    err = _func_call(c_func, c_context, c_params, codec.c_arity, out.c_out, _ONE)
    if err:
        raise Trap(_error(err))
    return codec.lift_result(out.slots)  # type: ignore[misc]


def release_result(arena: Arena) -> None:
    """Free the result an arena's slot keeps (see :func:`call_lowered`),
    leaving the slot empty (a bool, which owns nothing)."""
    if arena.slots:
        val_delete(arena.c_out)
        MEM[arena.slots] = 0


def _lower_with_codecs(codec: FuncCodec, args: Sequence[Any], arena: Arena) -> Any:
    """Lower the arguments with the codec objects (what the generated code
    declined: they raise the errors), into the arena's parameter slots."""
    arena.reset()
    n = codec.arity
    if not n:
        return None
    if n <= MAX_PARAMS:
        params, c_params = arena.slots + _VAL, arena.c_params
    else:
        params = arena.alloc(_VAL * n)
        c_params = c_void_p(params)
    for i, c in enumerate(codec.params):
        c.lower(args[i], arena, params + i * _VAL)
    return c_params


def lower_ahead(codec: FuncCodec, args: Sequence[Any]) -> Any:
    """This thread's arena with ``args`` lowered into its parameter slots
    when the generated lowering takes them and bounds their sizes, else
    ``None`` (then sizes must be checked, and the arguments are lowered in
    the call). For a call to lower once, before its transaction, what it
    may send several times: wasmtime only reads the arguments. Export calls
    of workers lower into their own arenas; only another call lowering
    ahead on this thread (one made from a signal handler, a clock or a
    binding, while this one runs) lowers here, and it moves
    :attr:`Arena.stamp`: compare it before each send."""
    if not codec.checks_sizes:
        return None
    arena = _scratch.call
    if arena.grown or arena.keep:
        arena.reset()
    else:
        arena.pos = arena.first
    arena.stamp += 1
    return arena if codec.lower_args(args, arena) else None  # type: ignore[misc]


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
        if nargs == 1:  # store.read, store.write
            value = fn(context, codec.lift_arg(args))
        elif nargs == 0:
            value = fn(context)
        else:
            value = fn(context, *[c.lift(args + i * _VAL) for i, c in enumerate(codec.params)])
        if value is OK_NONE and codec.c_ok_none is not None:
            _val_clone(codec.c_ok_none, c_void_p(results))
        elif codec.result is not None:
            _val_clone(codec.lower_result(value, _scratch.host.reset()), c_void_p(results))
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


#: Made last: its arenas' layout uses constants defined throughout the module.
_scratch = _Scratch()
