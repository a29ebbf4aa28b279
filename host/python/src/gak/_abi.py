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
  its cases "look different", so a host function cannot return the ``err``
  case of ``result<option<string>, store-error>`` (``none`` matches first).
  The codecs here keep every ``result`` tagged: ``(True, ok)`` / ``(False, err)``.

Representation on the Python side (internal; :mod:`gak.kernel` maps it to
dataclasses): ``string`` → ``str``; ``u32``/``u64`` → ``int`` (range-checked
before anything is lowered); ``list<u8>`` → ``bytes``; other lists → ``list``;
records and tuples → ``tuple`` in declaration order; ``option`` → value or
``None``; ``result`` → ``(is_ok, payload)``; ``variant`` → ``(case, payload)``;
``enum`` → ``str``.

Ownership follows the C API (``crates/c-api/src/component``): values we lower
for an export call stay ours and are deleted after the call; the value an
export returns is ours and deleted after lifting; a host function's arguments
belong to wasmtime, and its result (lowered into wasmtime's slot) becomes
wasmtime's. Every nested buffer is allocated by the C API's own constructors
so that wasmtime's ``Drop`` can free it.

``tests/test_abi.py`` pins all of this: the version, the struct layout the
byte-list fast path relies on, and the wasmtime-py behaviour this module works
around (so we notice when it is fixed upstream).
"""

from __future__ import annotations

import ctypes
import struct
from ctypes import byref, c_char_p, c_size_t, c_void_p, string_at
from typing import Any, Callable, Sequence

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime.component import _types as wt

#: The wasmtime-py version this module was written and tested against.
WASMTIME_VERSION = "50.0.1"

Val = ffi.wasmtime_component_val_t

# Kinds of wasmtime_component_val_t (crates/c-api/include/wasmtime/component/val.h).
_BOOL, _U8, _U32_KIND, _U64_KIND = 0, 2, 6, 8
_STRING, _LIST, _RECORD, _TUPLE, _VARIANT, _ENUM, _OPTION, _RESULT = 12, 13, 14, 15, 16, 17, 18, 19


def _fn(name: str, restype: Any, *argtypes: Any) -> Any:
    # `dll[name]` makes a fresh function object, so these prototypes do not
    # change the ones wasmtime-py's own bindings use.
    f = ffi.dll[name]
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_byte_vec_new = _fn("wasm_byte_vec_new", None, c_void_p, c_size_t, c_char_p)
_vallist_new = _fn("wasmtime_component_vallist_new", None, c_void_p, c_size_t, c_void_p)
_record_new = _fn("wasmtime_component_valrecord_new", None, c_void_p, c_size_t, c_void_p)
_tuple_new = _fn("wasmtime_component_valtuple_new", None, c_void_p, c_size_t, c_void_p)
_val_new = _fn("wasmtime_component_val_new", c_void_p, c_void_p)
val_delete = _fn("wasmtime_component_val_delete", None, c_void_p)
_func_call = _fn(
    "wasmtime_component_func_call", c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t
)

# Layouts of the C API's structs on 64-bit targets (checked against ctypes in
# tests/test_abi.py): a Val is {kind: u8, payload at 8}, 32 bytes; a vec or
# name is {size: usize, data: ptr}; a record entry is {name, val at 16}, 48
# bytes; a variant is {name, val ptr at 16}; a result is {is_ok, val ptr at 8}.
_VAL = 32
_OF = 8
_ENTRY = 48
assert ctypes.sizeof(Val) == _VAL and Val.of.offset == _OF
assert ctypes.sizeof(ffi.wasmtime_component_valrecord_entry_t) == _ENTRY
assert ffi.wasmtime_component_valrecord_entry_t.val.offset == 16
assert ffi.wasmtime_component_valvariant_t.val.offset == 16
assert ffi.wasmtime_component_valresult_t.val.offset == 8

_addressof = ctypes.addressof
_c_char = ctypes.c_char
_QQ = struct.Struct("<QQ").unpack_from
_Q = struct.Struct("<Q").unpack_from
_I = struct.Struct("<I").unpack_from
_put_q = struct.Struct("<Q").pack_into
_put_kind_u64 = struct.Struct("<B7xQ").pack_into
_put_kind_u32 = struct.Struct("<B7xI").pack_into
_put_kind_bool = struct.Struct("<B7x?").pack_into
_put_kind_result = struct.Struct("<B7x?7xQ").pack_into


class ArgError(Exception):
    """A Python value that cannot be sent: out of range, not a case, not UTF-8."""


class Trap(Exception):
    """The component trapped (or wasmtime refused the call): the instance is unusable."""


def _buffer(size: int) -> tuple[bytearray, int]:
    """A zeroed buffer (zero bytes are `Bool(false)` values and empty names,
    which wasmtime can always drop) and its address."""
    buf = bytearray(size)
    return buf, _addressof(_c_char.from_buffer(buf)) if size else 0


# Every codec lowers into (buf, base, off): the Val at `off` of the buffer
# `buf` whose address is `base`, and lifts from (mem, off): the Val at `off`
# of the bytes `mem` read from C memory. Composite lowerings hand their
# element buffer to wasmtime (the C API's `*_new` copies it) even when an
# element fails, so a partly lowered value is always one wasmtime can drop.


class Codec:
    """Lowers a Python value into a Val slot and lifts one back."""

    __slots__ = ()

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:  # pragma: no cover
        raise NotImplementedError

    def lift(self, mem: bytes, off: int) -> Any:  # pragma: no cover
        raise NotImplementedError


class _Bool(Codec):
    __slots__ = ()

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"expected a bool, got {type(value).__name__}")
        _put_kind_bool(buf, off, _BOOL, value)

    def lift(self, mem: bytes, off: int) -> Any:
        return mem[off + _OF] != 0


def _int(value: Any, bound: int, name: str) -> int:
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an int for {name}, got {type(value).__name__}")
        value = int(value)
    if not 0 <= value < bound:
        raise ArgError(f"{value} is out of range for {name}")
    return value


class _U64Codec(Codec):
    __slots__ = ()

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        _put_kind_u64(buf, off, _U64_KIND, _int(value, 1 << 64, "u64"))

    def lift(self, mem: bytes, off: int) -> Any:
        return _Q(mem, off + _OF)[0]


class _U32Codec(Codec):
    __slots__ = ()

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        _put_kind_u32(buf, off, _U32_KIND, _int(value, 1 << 32, "u32"))

    def lift(self, mem: bytes, off: int) -> Any:
        return _I(mem, off + _OF)[0]




def _utf8(value: Any) -> bytes:
    if type(value) is not str and not isinstance(value, str):
        raise TypeError(f"expected a str, got {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgError(f"not valid Unicode text: {e.reason}") from None


def _name(mem: bytes, off: int) -> str:
    n, data = _QQ(mem, off)
    return string_at(data, n).decode("utf-8") if n else ""


class _String(Codec):
    __slots__ = ()

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        data = _utf8(value)
        _byte_vec_new(base + off + _OF, len(data), data)
        buf[off] = _STRING

    def lift(self, mem: bytes, off: int) -> Any:
        return _name(mem, off + _OF)


class _Bytes(Codec):
    """``list<u8>``: built and read as whole buffers, not element by element
    (a 1 MiB payload would otherwise take seconds)."""

    __slots__ = ()

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(value).__name__}")
        data = bytes(value)
        n = len(data)
        # n consecutive Val{kind: u8, payload: the byte}, zero elsewhere.
        elems, addr = _buffer(_VAL * n)
        if n:
            elems[0::_VAL] = bytes((_U8,)) * n
            elems[_OF::_VAL] = data
        _vallist_new(base + off + _OF, n, addr or None)
        buf[off] = _LIST

    def lift(self, mem: bytes, off: int) -> Any:
        n, data = _QQ(mem, off + _OF)
        return string_at(data, _VAL * n)[_OF::_VAL] if n else b""


class _List(Codec):
    __slots__ = ("elem",)

    def __init__(self, elem: Codec) -> None:
        self.elem = elem

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        n = len(value)
        elems, addr = _buffer(_VAL * n)
        buf[off] = _LIST
        lower = self.elem.lower
        try:
            for i in range(n):
                lower(value[i], elems, addr, i * _VAL)
        finally:
            _vallist_new(base + off + _OF, n, addr or None)

    def lift(self, mem: bytes, off: int) -> Any:
        n, data = _QQ(mem, off + _OF)
        if not n:
            return []
        arr = string_at(data, _VAL * n)
        lift = self.elem.lift
        return [lift(arr, i * _VAL) for i in range(n)]


class _Record(Codec):
    __slots__ = ("names", "fields", "n")

    def __init__(self, names: Sequence[str], fields: Sequence[Codec]) -> None:
        self.names = [n.encode("utf-8") for n in names]
        self.fields = list(fields)
        self.n = len(self.fields)

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        n = self.n
        if len(value) != n:
            raise TypeError(f"expected a record of {n} fields, got {len(value)}")
        entries, addr = _buffer(_ENTRY * n)
        buf[off] = _RECORD
        try:
            for i in range(n):
                name = self.names[i]
                _byte_vec_new(addr + i * _ENTRY, len(name), name)
                self.fields[i].lower(value[i], entries, addr, i * _ENTRY + 16)
        finally:
            _record_new(base + off + _OF, n, addr)

    def lift(self, mem: bytes, off: int) -> Any:
        n, data = _QQ(mem, off + _OF)
        arr = string_at(data, _ENTRY * n)
        return tuple([f.lift(arr, i * _ENTRY + 16) for i, f in enumerate(self.fields)])


class _Tuple(Codec):
    __slots__ = ("elems",)

    def __init__(self, elems: Sequence[Codec]) -> None:
        self.elems = list(elems)

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        n = len(self.elems)
        if len(value) != n:
            raise TypeError(f"expected a tuple of {n}, got {len(value)}")
        elems, addr = _buffer(_VAL * n)
        buf[off] = _TUPLE
        try:
            for i, codec in enumerate(self.elems):
                codec.lower(value[i], elems, addr, i * _VAL)
        finally:
            _tuple_new(base + off + _OF, n, addr)

    def lift(self, mem: bytes, off: int) -> Any:
        n, data = _QQ(mem, off + _OF)
        arr = string_at(data, _VAL * n)
        return tuple([c.lift(arr, i * _VAL) for i, c in enumerate(self.elems)])


def _boxed(codec: Codec, value: Any) -> int:
    """A heap Val owned by the C API (for option / variant / result payloads);
    boxed even when lowering fails, so the caller's tree stays droppable."""
    tmp, addr = _buffer(_VAL)
    try:
        codec.lower(value, tmp, addr, 0)
    except BaseException:
        val_delete(addr)
        raise
    return _val_new(addr)  # type: ignore[no-any-return]


def _deref(p: int) -> bytes:
    return string_at(p, _VAL)


class _Option(Codec):
    __slots__ = ("inner",)

    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        _put_kind_u64(buf, off, _OPTION, 0 if value is None else _boxed(self.inner, value))

    def lift(self, mem: bytes, off: int) -> Any:
        p = _Q(mem, off + _OF)[0]
        return self.inner.lift(_deref(p), 0) if p else None


class _Result(Codec):
    __slots__ = ("ok", "err")

    def __init__(self, ok: Codec | None, err: Codec | None) -> None:
        self.ok = ok
        self.err = err

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        is_ok, payload = value
        codec = self.ok if is_ok else self.err
        # Every byte written: wasmtime pre-fills result slots with
        # `Bool(false)`, whose union tail is undefined.
        _put_kind_result(buf, off, _RESULT, bool(is_ok), 0 if codec is None else _boxed(codec, payload))

    def lift(self, mem: bytes, off: int) -> Any:
        is_ok = mem[off + _OF] != 0
        codec = self.ok if is_ok else self.err
        if codec is None:
            return (is_ok, None)
        return (is_ok, codec.lift(_deref(_Q(mem, off + _OF + 8)[0]), 0))


class _Variant(Codec):
    __slots__ = ("cases",)

    def __init__(self, cases: Sequence[tuple[str, Codec | None]]) -> None:
        self.cases = {name: (name.encode("utf-8"), codec) for name, codec in cases}

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        tag, payload = value
        case = self.cases.get(tag)
        if case is None:
            raise ArgError(f"{tag!r} is not a case of this variant")
        name, codec = case
        _put_q(buf, off + _OF + 16, 0)
        _byte_vec_new(base + off + _OF, len(name), name)
        buf[off] = _VARIANT
        if codec is not None:
            _put_q(buf, off + _OF + 16, _boxed(codec, payload))

    def lift(self, mem: bytes, off: int) -> Any:
        tag = _name(mem, off + _OF)
        codec = self.cases[tag][1]
        if codec is None:
            return (tag, None)
        return (tag, codec.lift(_deref(_Q(mem, off + _OF + 16)[0]), 0))


class _Enum(Codec):
    __slots__ = ("names",)

    def __init__(self, names: Sequence[str]) -> None:
        self.names = {n: n.encode("utf-8") for n in names}

    def lower(self, value: Any, buf: bytearray, base: int, off: int) -> None:
        name = self.names.get(value) if isinstance(value, str) else None
        if name is None:
            raise ArgError(f"{value!r} is not one of {sorted(self.names)}")
        _byte_vec_new(base + off + _OF, len(name), name)
        buf[off] = _ENUM

    def lift(self, mem: bytes, off: int) -> Any:
        return _name(mem, off + _OF)


def codec_of(ty: Any) -> Codec:
    """Build the codec for one wasmtime-py component type, once."""
    if isinstance(ty, wt.Bool):
        return _Bool()
    if isinstance(ty, wt.U32):
        return _U32Codec()
    if isinstance(ty, wt.U64):
        return _U64Codec()
    if isinstance(ty, wt.String):
        return _String()
    if isinstance(ty, wt.ListType):
        elem = ty.element
        return _Bytes() if isinstance(elem, wt.U8) else _List(codec_of(elem))
    if isinstance(ty, wt.RecordType):
        fields = ty.fields
        return _Record([n for n, _ in fields], [codec_of(t) for _, t in fields])
    if isinstance(ty, wt.TupleType):
        return _Tuple([codec_of(t) for t in ty.elements])
    if isinstance(ty, wt.OptionType):
        return _Option(codec_of(ty.payload))
    if isinstance(ty, wt.ResultType):
        ok, err = ty.ok, ty.err
        return _Result(codec_of(ok) if ok is not None else None, codec_of(err) if err is not None else None)
    if isinstance(ty, wt.VariantType):
        return _Variant([(n, codec_of(t) if t is not None else None) for n, t in ty.cases])
    if isinstance(ty, wt.EnumType):
        return _Enum(ty.names)
    raise TypeError(f"gak's WIT uses no {type(ty).__name__}")


class FuncCodec:
    """Parameter and result codecs of one component function."""

    __slots__ = ("params", "result", "arity", "names")

    def __init__(self, fty: Any) -> None:
        params = fty.params
        self.names = [n for n, _ in params]
        self.params = [codec_of(t) for _, t in params]
        result = fty.result
        self.result = codec_of(result) if result is not None else None
        self.arity = len(self.params)


def _error(ptr: int) -> str:
    return str(wasmtime.WasmtimeError._from_ptr(ctypes.cast(ptr, ctypes.POINTER(ffi.wasmtime_error_t))))


def call(func_ptr: int, context: int, codec: FuncCodec, args: Sequence[Any]) -> Any:
    """Call an exported function: lower ``args``, call, lift the result.

    Raises :class:`ArgError` / ``TypeError`` before entering wasm when an
    argument cannot be lowered (nothing ran), and :class:`Trap` when the call
    itself failed (the instance must then be discarded).
    """
    n = codec.arity
    params, paddr = _buffer(_VAL * n) if n else (bytearray(), 0)
    lowered = 0
    try:
        for i, c in enumerate(codec.params):
            c.lower(args[i], params, paddr, i * _VAL)
            lowered = i + 1
        result = codec.result
        if result is None:
            err = _func_call(func_ptr, context, paddr or None, n, None, 0)
            if err:
                raise Trap(_error(err))
            return None
        out, oaddr = _buffer(_VAL)
        err = _func_call(func_ptr, context, paddr or None, n, oaddr, 1)
        if err:
            raise Trap(_error(err))
        try:
            return result.lift(bytes(out), 0)
        finally:
            val_delete(oaddr)
    finally:
        # The one that failed (if any) is droppable too: see the codecs.
        for i in range(min(lowered + 1, n)):
            val_delete(paddr + i * _VAL)


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
_memmove = ctypes.memmove


def _trap_pointer(message: str) -> int:
    err = wasmtime.WasmtimeError(message)
    return ctypes.cast(err._consume(), c_void_p).value or 0


@_callback_type
def _dispatch(data: int, context: int, _ty: int, args: int, nargs: int, results: int, nresults: int) -> int:
    # An exception escaping here would be printed and swallowed by ctypes;
    # every failure becomes a trap instead, which the host then treats as
    # "instance unusable". Arguments belong to wasmtime (read, never freed);
    # the result is built in our buffer and moved into wasmtime's slot.
    try:
        fn, codec = _HOST_FNS[data]
        if nargs:
            mem = string_at(args, _VAL * nargs)
            value = fn(context, *[c.lift(mem, i * _VAL) for i, c in enumerate(codec.params)])
        else:
            value = fn(context)
        result = codec.result
        if result is not None:
            out, addr = _buffer(_VAL)
            try:
                result.lower(value, out, addr, 0)
            except BaseException:
                val_delete(addr)
                raise
            _memmove(results, addr, _VAL)
        return 0
    except BaseException as e:  # noqa: BLE001 - must never unwind into wasmtime
        return _trap_pointer(f"gak host function failed: {type(e).__name__}: {e}")


@_finalizer_type
def _finalize(data: int) -> None:
    _HOST_FNS.pop(data or 0, None)


def add_host_func(linker_instance: Any, name: str, fn: HostFn, fty: Any) -> None:
    """Define ``name`` in a linker instance, dispatching to ``fn`` with the
    types of ``fty`` (the import's type, from the component) cached."""
    key = _next_host_fn[0]
    _next_host_fn[0] += 1
    _HOST_FNS[key] = (fn, FuncCodec(fty))
    raw = name.encode("utf-8")
    err = _add_func(ctypes.cast(linker_instance.ptr(), c_void_p), raw, len(raw), _dispatch, key, _finalize)
    if err:
        _HOST_FNS.pop(key, None)
        raise wasmtime.WasmtimeError._from_ptr(ctypes.cast(err, ctypes.POINTER(ffi.wasmtime_error_t)))


def func_address(func: Any) -> int:
    """The address of a wasmtime-py component ``Func``'s C handle."""
    return _addressof(func._func)


def context_address(store: Any) -> int:
    """The address of a store's ``wasmtime_context_t``, stable for its life."""
    return ctypes.cast(store._context(), c_void_p).value or 0
