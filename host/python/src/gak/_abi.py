"""Calls across the component boundary, written against wasmtime-py 50.0.1.

This module, with :mod:`gak._mem` and :mod:`gak._codecs`, reaches below
wasmtime-py's public API (its ``_ffi`` bindings of the C API and the layout
of ``wasmtime_component_val_t``). It exists for two reasons, both measured
with this component:

- **Speed.** wasmtime-py 50 re-derives every component type on every call
  (``Func.__call__`` reads ``FuncType.params`` and walks record fields through
  ``valtype_from_ptr``); a claim cost ~314 µs, mostly there. Here each
  function's values are lowered and lifted by code generated from the WIT
  (:mod:`gak._lower`, :mod:`gak._lift`, :mod:`gak._store_abi`: plain modules,
  nothing is generated at run time), with the codecs of :mod:`gak._codecs`
  built once per function as the fallback that raises the errors.
- **Correctness.** wasmtime-py maps a ``result`` to a bare Python value when
  its cases "look different", so a host function could not return the
  ``err`` case of gak:kernel@0.2.0's ``result<option<string>, store-error>``.
  Results stay tagged here: ``(True, ok)`` / ``(False, err)``.

How values move (``crates/c-api/src/component``): the C API only *reads*
an export's arguments (``Val::from(&c_val)``), so they are built entirely in
Python-owned memory (an :class:`~gak._mem.Arena` per call) with no C call at
all; the value an export returns is wasmtime's allocation, read and then
dropped; a host function's arguments are read in place; its result is built
in an arena and handed over with ONE ``wasmtime_component_val_clone`` (a
deep copy into wasmtime's allocator, which is what wasmtime later drops).
Calls go through a ``PyDLL`` handle, so the GIL is not handed back and forth
around each call and callback.

``tests/test_abi.py`` pins the wasmtime-py version, the struct layout and
the wasmtime-py behaviour this module works around (so we notice when it is
fixed upstream).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import threading
from ctypes import c_char_p, c_size_t, c_void_p
from typing import Any, Callable, Iterator, Sequence

import wasmtime
from wasmtime import _ffi as ffi

from . import _layout as L
from ._codecs import ArgError, Codec, Result, codec_of
from ._lift import LIFT
from ._lower import LOWER
from ._mem import CONSTANTS, MAX_PARAMS, MEM, Arena
from ._store_abi import BLOCK_SIZE, LIFT_ARGS, LOWER_RESULTS, prepare_block
from .limits import MAX_TOTAL, MAX_VALUE

__all__ = ["ArgError", "Arena", "FuncCodec", "Trap", "call_export", "call_lowered", "lower_ahead"]

#: The wasmtime-py version this module was written and tested against.
WASMTIME_VERSION = "50.0.1"

Val = ffi.wasmtime_component_val_t

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
# converts without calling from_param (argtypes cost ~5,000 instructions a
# call).
_val_clone = _fn("wasmtime_component_val_clone", None)
val_delete = _fn("wasmtime_component_val_delete", None)
# With the GIL held during an export call, the host functions it calls back
# (all Python) need not take it again. A call spends most of its time in
# those host functions anyway; SQLite and psycopg release the GIL themselves
# while they wait for I/O.
_func_call = _fn("wasmtime_component_func_call", c_void_p)


class Trap(Exception):
    """The component trapped (or wasmtime refused the call): the instance is unusable."""


class _Scratch(threading.local):
    """Per-thread arenas, reused call after call: one for an export call's
    arguments (when the caller has none of its own: workers do), one for
    host functions' results (a host function runs while its export call's
    arguments are still in use), with the block the store's usual answer is
    written into."""

    def __init__(self) -> None:
        self.call = Arena(slots=True)
        self.host = Arena(8192, slots=True, block=BLOCK_SIZE)
        prepare_block(self.host.block)


#: What host functions return for `ok` with no payload (``store.write``).
OK_NONE = (True, None)


class FuncCodec:
    """How one component function's values cross: the generated lowering
    and lifting for a function of the contract (by name: the caller checked
    the component's type against :mod:`gak._signatures`), and the codecs of
    the types the component declares, which lower what the generated code
    declines (and raise the errors) and serve functions the contract does
    not have (``wasi:random``)."""

    __slots__ = (
        "params", "result", "arity", "c_arity", "lower_args", "checks_sizes", "lift_result", "lift_arg",
        "lower_result", "ok_none", "c_ok_none",
    )  # fmt: skip

    def __init__(self, fty: Any, name: str = "") -> None:
        self.params: list[Codec] = [codec_of(t) for _, t in fty.params]
        result = fty.result
        self.result: Codec | None = codec_of(result) if result is not None else None
        self.arity = len(self.params)
        self.c_arity = c_size_t(self.arity)
        #: An export's arguments into an arena's slots (None: the codecs),
        #: and whether what it takes is within every size limit (no lists
        #: or bytes, few enough texts that their total cannot pass
        #: MAX_TOTAL): then a call it takes needs no other size check.
        lower, texts = LOWER.get(name, (None, None))
        self.lower_args = lower if self.arity <= MAX_PARAMS else None
        self.checks_sizes = self.lower_args is not None and texts is not None and texts * MAX_VALUE <= MAX_TOTAL
        #: The result Val at an address, lifted.
        self.lift_result = LIFT.get(name) or (self.result.lift if self.result is not None else None)
        #: A host function's one parameter (store.read, store.write).
        self.lift_arg = LIFT_ARGS.get(name) or (self.params[0].lift if self.arity == 1 else None)
        #: A host function's result into a host arena: the ctypes address
        #: of the Val to hand over, or None (then :meth:`lower_generic`).
        self.lower_result = LOWER_RESULTS.get(name) or self.lower_generic
        # A frequent host result, lowered once: `store.write` answers it
        # every time it succeeds.
        self.ok_none = 0
        self.c_ok_none: Any = None
        r = self.result
        if isinstance(r, Result) and r.ok is None:
            self.ok_none = CONSTANTS.alloc(L.VAL)
            r.lower(OK_NONE, CONSTANTS, self.ok_none)
            self.c_ok_none = c_void_p(self.ok_none)

    def lower_generic(self, value: Any, arena: Arena) -> Any:
        """A host function's result lowered by the codecs into ``arena``'s
        result slot: its ctypes address."""
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
        params, c_params = arena.slots + L.VAL, arena.c_params
    else:
        params = arena.alloc(L.VAL * n)
        c_params = c_void_p(params)
    for i, c in enumerate(codec.params):
        c.lower(args[i], arena, params + i * L.VAL)
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


# --- host functions ---------------------------------------------------------

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
            value = fn(context, *[c.lift(args + i * L.VAL) for i, c in enumerate(codec.params)])
        if value is OK_NONE and codec.c_ok_none is not None:
            _val_clone(codec.c_ok_none, c_void_p(results))
        elif codec.result is not None:
            arena = _scratch.host.reset()
            c = codec.lower_result(value, arena)
            if c is None:  # what the generated lowering declined
                c = codec.lower_generic(value, arena.reset())
            _val_clone(c, c_void_p(results))
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
    ``label`` names it (``store#read``): the generated code serves a label
    :mod:`gak._store_abi` has (the caller checked the type), and
    :func:`counting` counts by it (default: ``name``)."""
    key = _next_host_fn[0]
    _next_host_fn[0] += 1
    _HOST_FNS[key] = (fn, FuncCodec(fty, label))
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
    return ctypes.addressof(func._func)


def context_address(store: Any) -> int:
    """The address of a store's ``wasmtime_context_t``, stable for its life."""
    return ctypes.cast(store._context(), c_void_p).value or 0


_scratch = _Scratch()
