"""Memory the component boundary's values are built in and read from,
written against wasmtime-py 50.0.1 and CPython 3.11-3.13.

wasmtime's C API takes and hands back values as trees of
``wasmtime_component_val_t`` (:mod:`gak._layout` states their layout, which
is checked here against wasmtime-py's ctypes structs). The host reads and
writes them through ONE ``memoryview`` over the address space
(:data:`MEM`), so a field access is a ``struct`` call, not a ctypes object;
what it builds lives in :class:`Arena` s, Python-owned chunks reused call
after call.

What the host hands to wasmtime is only read before the call returns (an
export's arguments, converted on entry; a host function's result, deep-
copied by ``val_clone``), so a ``str`` or ``bytes`` object's own buffer can
be pointed at instead of copying its text: a compact ASCII ``str`` (what
keys, ids and the component's JSON are) stores its characters, which are
their UTF-8, right after its header (:data:`ZERO_COPY` says whether this
interpreter lays them out as :mod:`gak._layout` says).
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any, Callable, Sequence

from wasmtime import _ffi as ffi

from . import _layout as L

# The layout the generated modules are written against, checked against
# wasmtime-py's own description of the C API (crates/c-api/include/wasmtime/
# component/val.h): a mismatch is an import-time fact, not a misread value.
assert ctypes.sizeof(ffi.wasmtime_component_val_t) == L.VAL
assert ffi.wasmtime_component_val_t.of.offset == L.PAYLOAD
assert ctypes.sizeof(ffi.wasmtime_component_valrecord_entry_t) == L.ENTRY
assert ffi.wasmtime_component_valrecord_entry_t.val.offset == L.ENTRY_VAL
assert ffi.wasmtime_component_valvariant_t.val.offset == 16
assert ffi.wasmtime_component_valresult_t.val.offset == 8
assert ctypes.sizeof(ctypes.c_void_p) == 8
for _kind in ("BOOL", "U8", "S32", "U32", "U64", "STRING", "LIST", "RECORD", "TUPLE", "VARIANT", "ENUM", "OPTION", "RESULT"):
    assert getattr(ffi, f"WASMTIME_COMPONENT_{_kind}").value == getattr(L, _kind), _kind

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


def _layout_holds() -> bool:
    """Whether this interpreter lays strings and bytes out as
    :mod:`gak._layout` says (CPython 3.11 to 3.13, the default build),
    checked on strings made at run time, inline ones and two that must not
    pass."""
    if sys.getsizeof("") - 1 != L.STR_DATA or sys.getsizeof(b"") - 1 != L.BYTES_DATA:
        return False
    made = "".join(["gak", "-", str(len(sys.argv) + 12345)])
    for text in ("", made, made * 500):
        i = id(text)
        if ctypes.string_at(i + L.STR_STATE, 1)[0] & L.COMPACT_ASCII != L.COMPACT_ASCII:
            return False
        if ctypes.string_at(i + L.STR_DATA, len(text)) != text.encode():
            return False
    wide = made + "\u00e9"
    if ctypes.string_at(id(wide) + L.STR_STATE, 1)[0] & L.COMPACT_ASCII == L.COMPACT_ASCII:
        return False

    class Sub(str):
        pass

    if ctypes.string_at(id(Sub(made)) + L.STR_STATE, 1)[0] & L.COMPACT_ASCII == L.COMPACT_ASCII:
        return False
    data = made.encode() * 3
    return ctypes.string_at(id(data) + L.BYTES_DATA, len(data)) == data


#: False on an interpreter laid out otherwise: every text is then copied
#: into the arena (the generated lowerings test it before reading a
#: string's header).
ZERO_COPY = _layout_holds()


def encoded(value: str) -> bytes | None:
    """``value``'s UTF-8, or ``None`` when it has none (lone surrogates:
    the codecs then raise their ArgError)."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        return None


class _Texts(dict):  # type: ignore[type-arg]
    """``struct`` unpackers of ``n`` bytes by ``n`` (cached up to
    :data:`_SHORT`: unpacking costs less than slicing :data:`MEM`):
    ``TX[n](MEM, address)[0]`` is the ``bytes`` there."""

    def __missing__(self, n: int) -> Callable[..., tuple[bytes]]:
        if n > _SHORT:
            return lambda mem, off: (mem[off : off + n].tobytes(),)
        f = self[n] = struct.Struct(f"{n}s").unpack_from
        return f


_SHORT = 4096
TX = _Texts()
TX[0] = lambda mem, off: (b"",)

#: Unpackers of the second payload word of ``n`` consecutive Vals (a
#: list's records' or tuples' element addresses), by ``n``.
_WORDS: dict[int, Callable[..., tuple[int, ...]]] = {}
_SECOND_WORD = f"{L.PAYLOAD + 8}xQ{L.VAL - L.PAYLOAD - 16}x"


def words(n: int) -> Callable[..., tuple[int, ...]]:
    """The unpacker of the element addresses of a list of ``n`` records or
    tuples: one unpack per list."""
    f = _WORDS.get(n)
    if f is None:
        f = struct.Struct("<" + _SECOND_WORD * n).unpack_from
        if n <= 64:
            _WORDS[n] = f
    return f


def _buffer(size: int) -> tuple[bytearray, int]:
    """A zeroed Python-owned buffer and its address."""
    buf = bytearray(size)
    return buf, _addressof(_c_char.from_buffer(buf)) if size else 0


#: The most parameters an export may have for its Vals to go in an arena's
#: slots (gak's have at most four); more are allocated per call.
MAX_PARAMS = 8


class Arena:
    """Python-owned memory for C values: chunks never moved or freed while the
    arena lives. Fresh chunks are zeroed; after :meth:`reset` memory is reused
    as is, so every lowering writes every field its kind needs."""

    __slots__ = (
        "chunks", "pos", "end", "first", "size", "buf", "base", "start", "keep", "slots", "c_out", "c_params",
        "block", "c_block", "grown", "stamp",
    )  # fmt: skip

    def __init__(self, size: int = 4096, slots: bool = False, block: int = 0) -> None:
        self.chunks: list[bytearray] = []
        #: Whether chunks beyond the first were taken (reset drops them).
        self.grown = False
        #: Counts the calls lowered into the slots by lower_ahead: a call
        #: that lowered ahead sends its Vals only while the stamp is its own.
        self.stamp = 0
        self.pos = self.end = 0
        self._grow(size + block)
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
            self.pos += L.VAL * (1 + MAX_PARAMS)
            self.c_out = ctypes.c_void_p(self.slots)
            self.c_params = ctypes.c_void_p(self.slots + L.VAL)
        #: With ``block``: that many bytes a host function's usual answer
        #: is written into, laid out once (gak._store_abi.prepare_block).
        self.block = 0
        self.c_block: Any = None
        if block:
            self.block = self.pos
            self.pos += (block + 7) & ~7
            self.c_block = ctypes.c_void_p(self.block)
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

    def hold(self, data: bytes) -> int:
        """The address of ``data``'s bytes until the next reset: its own
        buffer, kept alive here (with :data:`ZERO_COPY`), else a copy."""
        if ZERO_COPY:
            self.keep.append(data)
            return id(data) + L.BYTES_DATA
        return self.copy(data)


#: Python-owned values that live as long as the process: record field names
#: and enum case names (wasmtime reads them with a value it copies), and
#: results lowered once.
CONSTANTS = Arena()


def constant(text: str) -> tuple[int, int]:
    """``(length, address)`` of the UTF-8 of ``text`` in memory that lives
    as long as the process."""
    data = text.encode("utf-8")
    return len(data), CONSTANTS.copy(data)


def constants(names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """:func:`constant` of each name, by name (an enum's cases)."""
    return {n: constant(n) for n in names}
