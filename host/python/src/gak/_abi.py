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
from ctypes import byref, c_char_p, c_size_t, c_void_p, string_at
from typing import Any, Callable, Sequence

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime.component import _types as wt

#: The wasmtime-py version this module was written and tested against.
WASMTIME_VERSION = "50.0.1"

Val = ffi.wasmtime_component_val_t
_VAL_SIZE = ctypes.sizeof(Val)
_PAYLOAD_OFFSET = Val.of.offset

# Kinds of wasmtime_component_val_t (crates/c-api/include/wasmtime/component/val.h).
_BOOL, _U8, _U32, _U64 = 0, 2, 6, 8
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
_vallist_uninit = _fn("wasmtime_component_vallist_new_uninit", None, c_void_p, c_size_t)
_record_uninit = _fn("wasmtime_component_valrecord_new_uninit", None, c_void_p, c_size_t)
_tuple_uninit = _fn("wasmtime_component_valtuple_new_uninit", None, c_void_p, c_size_t)
_val_new = _fn("wasmtime_component_val_new", c_void_p, c_void_p)
val_delete = _fn("wasmtime_component_val_delete", None, c_void_p)
_func_call = _fn(
    "wasmtime_component_func_call", c_void_p, c_void_p, c_void_p, c_void_p, c_size_t, c_void_p, c_size_t
)

_ValPtr = ctypes.POINTER(Val)
_addressof = ctypes.addressof


class ArgError(Exception):
    """A Python value that cannot be sent: out of range, not a case, not UTF-8."""


class Trap(Exception):
    """The component trapped (or wasmtime refused the call): the instance is unusable."""


def _set_bytes(vec_addr: int, data: bytes) -> None:
    _byte_vec_new(vec_addr, len(data), data)


class Codec:
    """Lowers a Python value into a ``Val`` slot and lifts one back."""

    __slots__ = ()

    def lower(self, value: Any, dst: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def lift(self, src: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class _Bool(Codec):
    __slots__ = ()

    def lower(self, value: Any, dst: Any) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"expected a bool, got {type(value).__name__}")
        dst.kind = _BOOL
        dst.of.boolean = value

    def lift(self, src: Any) -> Any:
        return bool(src.of.boolean)


class _Unsigned(Codec):
    __slots__ = ("kind", "field", "bound", "name")

    def __init__(self, kind: int, field: str, bits: int) -> None:
        self.kind = kind
        self.field = field
        self.bound = 1 << bits
        self.name = f"u{bits}"

    def lower(self, value: Any, dst: Any) -> None:
        if type(value) is not int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"expected an int for {self.name}, got {type(value).__name__}")
            value = int(value)
        if not 0 <= value < self.bound:
            raise ArgError(f"{value} is out of range for {self.name}")
        dst.kind = self.kind
        setattr(dst.of, self.field, value)

    def lift(self, src: Any) -> Any:
        return getattr(src.of, self.field)


class _String(Codec):
    __slots__ = ()

    def lower(self, value: Any, dst: Any) -> None:
        if type(value) is not str:
            if not isinstance(value, str):
                raise TypeError(f"expected a str, got {type(value).__name__}")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ArgError(f"not valid Unicode text: {e.reason}") from None
        dst.kind = _STRING
        _byte_vec_new(_addressof(dst) + _PAYLOAD_OFFSET, len(data), data)

    def lift(self, src: Any) -> Any:
        s = src.of.string
        n = s.size
        return string_at(s.data, n).decode("utf-8") if n else ""


class _Bytes(Codec):
    """``list<u8>``: built and read as whole buffers, not element by element
    (a 1 MiB payload would otherwise take seconds)."""

    __slots__ = ()

    def lower(self, value: Any, dst: Any) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(value).__name__}")
        data = bytes(value)
        n = len(data)
        dst.kind = _LIST
        if n == 0:
            _vallist_new(_addressof(dst) + _PAYLOAD_OFFSET, 0, None)
            return
        # n consecutive Val{kind: u8, of.u8: byte}; zero elsewhere.
        buf = bytearray(_VAL_SIZE * n)
        buf[0::_VAL_SIZE] = bytes((_U8,)) * n
        buf[_PAYLOAD_OFFSET::_VAL_SIZE] = data
        raw = (ctypes.c_char * len(buf)).from_buffer(buf)
        _vallist_new(_addressof(dst) + _PAYLOAD_OFFSET, n, _addressof(raw))

    def lift(self, src: Any) -> Any:
        lst = src.of.list
        n = lst.size
        if n == 0:
            return b""
        return string_at(lst.data, _VAL_SIZE * n)[_PAYLOAD_OFFSET::_VAL_SIZE]


class _List(Codec):
    __slots__ = ("elem",)

    def __init__(self, elem: Codec) -> None:
        self.elem = elem

    def lower(self, value: Any, dst: Any) -> None:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        dst.kind = _LIST
        n = len(value)
        _vallist_uninit(_addressof(dst) + _PAYLOAD_OFFSET, n)
        data = dst.of.list.data
        lower = self.elem.lower
        for i in range(n):
            lower(value[i], data[i])

    def lift(self, src: Any) -> Any:
        lst = src.of.list
        data = lst.data
        lift = self.elem.lift
        return [lift(data[i]) for i in range(lst.size)]


class _Record(Codec):
    __slots__ = ("names", "fields", "n")

    def __init__(self, names: Sequence[str], fields: Sequence[Codec]) -> None:
        self.names = [n.encode("utf-8") for n in names]
        self.fields = list(fields)
        self.n = len(self.fields)

    def lower(self, value: Any, dst: Any) -> None:
        if len(value) != self.n:
            raise TypeError(f"expected a record of {self.n} fields, got {len(value)}")
        dst.kind = _RECORD
        _record_uninit(_addressof(dst) + _PAYLOAD_OFFSET, self.n)
        data = dst.of.record.data
        for i, (name, codec) in enumerate(zip(self.names, self.fields)):
            entry = data[i]
            _byte_vec_new(_addressof(entry), len(name), name)
            codec.lower(value[i], entry.val)

    def lift(self, src: Any) -> Any:
        data = src.of.record.data
        return tuple([codec.lift(data[i].val) for i, codec in enumerate(self.fields)])


class _Tuple(Codec):
    __slots__ = ("elems",)

    def __init__(self, elems: Sequence[Codec]) -> None:
        self.elems = list(elems)

    def lower(self, value: Any, dst: Any) -> None:
        if len(value) != len(self.elems):
            raise TypeError(f"expected a tuple of {len(self.elems)}, got {len(value)}")
        dst.kind = _TUPLE
        _tuple_uninit(_addressof(dst) + _PAYLOAD_OFFSET, len(self.elems))
        data = dst.of.tuple.data
        for i, codec in enumerate(self.elems):
            codec.lower(value[i], data[i])

    def lift(self, src: Any) -> Any:
        data = src.of.tuple.data
        return tuple([codec.lift(data[i]) for i, codec in enumerate(self.elems)])


def _boxed(codec: Codec, value: Any) -> int:
    """A heap ``Val`` owned by the C API (for option / variant / result payloads)."""
    tmp = Val()
    try:
        codec.lower(value, tmp)
    except BaseException:
        val_delete(_addressof(tmp))
        raise
    return _val_new(_addressof(tmp))


class _Option(Codec):
    __slots__ = ("inner", "offset")

    def __init__(self, inner: Codec) -> None:
        self.inner = inner

    def lower(self, value: Any, dst: Any) -> None:
        dst.kind = _OPTION
        if value is None:
            dst.of.option = None
        else:
            ctypes.c_void_p.from_address(_addressof(dst) + _PAYLOAD_OFFSET).value = _boxed(self.inner, value)

    def lift(self, src: Any) -> Any:
        p = src.of.option
        return self.inner.lift(p.contents) if p else None


class _Result(Codec):
    __slots__ = ("ok", "err")

    def __init__(self, ok: Codec | None, err: Codec | None) -> None:
        self.ok = ok
        self.err = err

    def lower(self, value: Any, dst: Any) -> None:
        is_ok, payload = value
        codec = self.ok if is_ok else self.err
        dst.kind = _RESULT
        r = dst.of.result
        r.is_ok = bool(is_ok)
        # The slot may hold stale bytes (wasmtime pre-fills result slots with
        # `Bool(false)`, whose union tail is undefined): always write the pointer.
        slot = ctypes.c_void_p.from_address(_addressof(r) + _RESULT_VAL_OFFSET)
        slot.value = None
        if codec is not None:
            slot.value = _boxed(codec, payload)

    def lift(self, src: Any) -> Any:
        r = src.of.result
        codec = self.ok if r.is_ok else self.err
        if codec is None:
            return (bool(r.is_ok), None)
        return (bool(r.is_ok), codec.lift(r.val.contents))


_RESULT_VAL_OFFSET = ffi.wasmtime_component_valresult_t.val.offset
_VARIANT_VAL_OFFSET = ffi.wasmtime_component_valvariant_t.val.offset


class _Variant(Codec):
    __slots__ = ("cases", "names")

    def __init__(self, cases: Sequence[tuple[str, Codec | None]]) -> None:
        self.cases = {name: (name.encode("utf-8"), codec) for name, codec in cases}

    def lower(self, value: Any, dst: Any) -> None:
        tag, payload = value
        case = self.cases.get(tag)
        if case is None:
            raise ArgError(f"{tag!r} is not a case of this variant")
        name, codec = case
        dst.kind = _VARIANT
        v = dst.of.variant
        base = _addressof(v)
        slot = ctypes.c_void_p.from_address(base + _VARIANT_VAL_OFFSET)
        slot.value = None
        _byte_vec_new(base, len(name), name)
        if codec is not None:
            slot.value = _boxed(codec, payload)

    def lift(self, src: Any) -> Any:
        v = src.of.variant
        d = v.discriminant
        tag = string_at(d.data, d.size).decode("utf-8")
        codec = self.cases[tag][1]
        return (tag, codec.lift(v.val.contents) if codec is not None else None)


class _Enum(Codec):
    __slots__ = ("names",)

    def __init__(self, names: Sequence[str]) -> None:
        self.names = {n: n.encode("utf-8") for n in names}

    def lower(self, value: Any, dst: Any) -> None:
        name = self.names.get(value) if isinstance(value, str) else None
        if name is None:
            raise ArgError(f"{value!r} is not one of {sorted(self.names)}")
        dst.kind = _ENUM
        _byte_vec_new(_addressof(dst) + _PAYLOAD_OFFSET, len(name), name)

    def lift(self, src: Any) -> Any:
        e = src.of.enumeration
        return string_at(e.data, e.size).decode("utf-8")


def codec_of(ty: Any) -> Codec:
    """Build the codec for one wasmtime-py component type, once."""
    if isinstance(ty, wt.Bool):
        return _Bool()
    if isinstance(ty, wt.U32):
        return _Unsigned(_U32, "u32", 32)
    if isinstance(ty, wt.U64):
        return _Unsigned(_U64, "u64", 64)
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

    __slots__ = ("params", "result", "arity")

    def __init__(self, fty: Any) -> None:
        self.params = [codec_of(t) for _, t in fty.params]
        result = fty.result
        self.result = codec_of(result) if result is not None else None
        self.arity = len(self.params)


def call(func_ptr: int, context: int, codec: FuncCodec, args: Sequence[Any]) -> Any:
    """Call an exported function: lower ``args``, call, lift the result.

    Raises :class:`ArgError` / ``TypeError`` before entering wasm when an
    argument cannot be lowered (nothing ran), and :class:`Trap` when the call
    itself failed (the instance must then be discarded).
    """
    n = codec.arity
    params = (Val * n)()
    try:
        for i, c in enumerate(codec.params):
            c.lower(args[i], params[i])
        out = Val()
        has_result = codec.result is not None
        err = _func_call(func_ptr, context, _addressof(params), n, _addressof(out) if has_result else None,
                         1 if has_result else 0)
        if err:
            raise Trap(str(wasmtime.WasmtimeError._from_ptr(ctypes.cast(err, ctypes.POINTER(ffi.wasmtime_error_t)))))
        if not has_result:
            return None
        try:
            return codec.result.lift(out)  # type: ignore[union-attr]
        finally:
            val_delete(_addressof(out))
    finally:
        base = _addressof(params)
        for i in range(n):
            val_delete(base + i * _VAL_SIZE)


#: A host function: receives the store context address and the lifted
#: arguments, returns the Python value of its result.
HostFn = Callable[..., Any]

_HOST_FNS: dict[int, tuple[HostFn, FuncCodec]] = {}
_next_host_fn = [1]

_callback_type = ctypes.CFUNCTYPE(c_size_t, c_void_p, c_void_p, c_void_p, _ValPtr, c_size_t, _ValPtr, c_size_t)
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
def _dispatch(data: int, context: int, _ty: int, args: Any, nargs: int, results: Any, nresults: int) -> int:
    # An exception escaping here would be printed and swallowed by ctypes;
    # every failure is turned into a trap instead, which the host then
    # treats as "instance unusable".
    try:
        fn, codec = _HOST_FNS[data]
        lifted = [c.lift(args[i]) for i, c in enumerate(codec.params)]
        value = fn(context, *lifted)
        if codec.result is not None:
            codec.result.lower(value, results[0])
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
