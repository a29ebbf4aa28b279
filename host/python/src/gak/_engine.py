"""The wasmtime embedding: one engine, compiled component and linker per
component file and process; per-worker instances binding the store import
(``read`` and ``write``, gak:kernel@0.4.0) to a session.

Host functions are defined once on a shared linker; each call finds its
worker by the store context it runs in (:data:`_WORKERS`, which holds no
worker alive: a kernel dropped without ``close()`` takes its workers and
connections with it).

A call crosses into the host few times: ``store.read`` (point reads, range
reads, the clock after them and the call's entropy together) and, when the
call decides ``ok``, one ``store.write`` with its whole write set. A claim
is the export plus one read plus one write.

Randomness never comes from a generator state a ``fork()`` could copy
(HOSTS.md rule 7): the entropy a read hands over (what tokens, holders and
reconcile claims are minted from) is ``os.urandom`` drawn for that call, and
``wasi:random`` (the Rust standard library's hash seeds) is served from
``os.urandom`` too, never from wasmtime-wasi's generator — a ChaCha state
seeded once per store, which ``fork()`` copies.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Optional

import wasmtime
from wasmtime import Engine, Store, WasiConfig
from wasmtime.component import Component, Linker

from wasmtime.component import _types as wt

from . import _abi
from ._codecs import describe
from ._contract import PACKAGE, VERSION
from ._fork import FORKS
from ._signatures import SIGNATURES
from .clock import Clock
from .errors import OpenError
from .stores._facts import MAX_ENTROPY
from .stores.base import StoreConflict, StoreFailure

#: ``gak:kernel@0.4.0``: the contract this host implements (a component of
#: another one is refused when it is opened).
CONTRACT = f"{PACKAGE}@{VERSION}"
#: Integers the contract accepts stay below 2**53 (every host language
#: represents them exactly); a clock past that is broken.
MAX_NUMBER = (1 << 53) - 1

#: Live workers by store context address, for the host functions. Weak: a
#: process-wide registry must not keep a dropped kernel's workers (and their
#: connections) alive (HOSTS.md rule 15).
_WORKERS: dict[int, "weakref.ReferenceType[Worker]"] = {}


def _register(context: int, worker: "Worker") -> None:
    def gone(ref: "weakref.ReferenceType[Worker]") -> None:
        # A later store may reuse the address: remove only our own entry.
        if _WORKERS.get(context) is ref:
            del _WORKERS[context]

    _WORKERS[context] = weakref.ref(worker, gone)


def _unregister(context: int) -> None:
    _WORKERS.pop(context, None)


def _wasmtime_version() -> str:
    from importlib.metadata import version

    return version("wasmtime")


def _cache_dir() -> Path:
    env = os.environ.get("GAK_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "gak"


def _load(engine: Engine, wasm: bytes) -> Component:
    """Compile ``wasm`` (~0.3 s), or load the artifact cached on disk, keyed by
    the component bytes and the wasmtime version."""
    digest = hashlib.sha256(wasm + _wasmtime_version().encode()).hexdigest()[:24]
    path = _cache_dir() / f"py-kernel-{digest}.cwasm"
    if path.is_file():
        try:
            # Same trust as the Rust host's cache: a file this code wrote
            # from the component with the same wasmtime version.
            return Component.deserialize_file(engine, str(path))
        except Exception:  # noqa: BLE001 - a stale or torn artifact
            path.unlink(missing_ok=True)
    component = Component(engine, wasm)
    try:  # caching is an optimisation: failing here only costs the next start
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{path.name}")
        tmp.write_bytes(component.serialize())
        os.replace(tmp, path)
    except OSError:
        pass
    return component


class Compiled:
    """Engine, component, linker and the per-function codecs (built once).
    A component is checked when it is opened: its contract version, then
    its functions' types against those the generated code was written for."""

    def __init__(self, path: Path) -> None:
        try:
            wasm = path.read_bytes()
        except OSError as e:
            raise OpenError(f"cannot read component {path}: {e}") from e
        self.path = path
        self.engine = Engine()
        try:
            self.component = _load(self.engine, wasm)
        except wasmtime.WasmtimeError as e:
            raise OpenError(f"{path} is not a loadable component: {e}") from e
        check_version(self.engine, self.component, path)
        check_signatures(self.engine, self.component, path)
        self.linker = Linker(self.engine)
        self.linker.add_wasip2()
        link_kernel_imports(self.engine, self.component, self.linker, path)
        shadow_random(self.engine, self.component, self.linker, path)
        self._exports = self.component.type.exports(self.engine)
        self._funcs: dict[str, tuple[Any, _abi.FuncCodec]] = {}
        self._lock = threading.Lock()

    def export(self, name: str) -> tuple[Any, _abi.FuncCodec]:
        """The export index and codec of ``interface#function``."""
        found = self._funcs.get(name)
        if found is not None:
            return found
        with self._lock:
            iface, fn = name.split("#")
            qualified = f"{PACKAGE}/{iface}@{VERSION}"
            parent = self.component.get_export_index(qualified)
            index = self.component.get_export_index(fn, parent) if parent is not None else None
            if index is None:
                raise OpenError(f"the component exports no {qualified}#{fn}")
            fty = self._exports[qualified].ty.exports(self.engine)[fn].ty
            found = (index, _abi.FuncCodec(fty, name))
            self._funcs[name] = found
            return found


def check_version(engine: Engine, component: Component, path: Path) -> None:
    """Refuse a component of a contract version this host does not
    implement, naming both (wit/world.wit: a host MUST refuse it when it
    opens; its interfaces would otherwise fail to link with a message about
    a missing import, or worse, link and mean something else)."""
    ty = component.type
    found = set()
    for name in list(ty.imports(engine)) + list(ty.exports(engine)):
        if name.startswith(f"{PACKAGE}/"):
            version = name.partition("@")[2]
            found.add(f"{PACKAGE}@{version}" if version else f"{PACKAGE} (unversioned)")
    if not found:
        raise OpenError(f"{path} is not a {PACKAGE} component; this host implements {CONTRACT}")
    if found != {CONTRACT}:
        raise OpenError(f"{path} is {' and '.join(sorted(found))}; this host implements {CONTRACT}")


def check_signatures(engine: Engine, component: Component, path: Path) -> None:
    """Refuse a component whose functions have other types than those of
    the WIT this package was generated from (:mod:`gak._signatures`): the
    generated code reads and writes values by the WIT's layout, and would
    read another one's fields wrongly. Same version, another WIT: a
    component built before a WIT edit, or a package not regenerated after
    one."""
    ty = component.type
    for name, item in list(ty.imports(engine).items()) + list(ty.exports(engine).items()):
        if not name.startswith(f"{PACKAGE}/"):
            continue
        iface = name.partition("/")[2].partition("@")[0]
        for fn, member in item.ty.exports(engine).items():
            want = SIGNATURES.get(f"{iface}#{fn}")
            if want is None or not isinstance(member.ty, wt.FuncType):
                continue
            have = describe(member.ty)
            if have != want:
                at = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
                lo = max(0, at - 40)
                raise OpenError(
                    f"{path}: {iface}#{fn} differs from the WIT this package was generated from, "
                    f"at ...{have[lo : at + 40]}... (expected ...{want[lo : at + 40]}...): "
                    "regenerate the package (cargo run -p gak-gen) or use the component built from its wit/"
                )


def link_kernel_imports(engine: Engine, component: Component, linker: Linker, path: Path) -> None:
    """Define the store import on ``linker`` (host functions that find their
    worker by store context)."""
    imports = component.type.imports(engine)
    name = f"{PACKAGE}/store@{VERSION}"
    try:
        store_ty = imports[name].ty.exports(engine)
    except KeyError:
        raise OpenError(f"{path} is not {PACKAGE}@{VERSION} (no import {name})") from None
    missing = sorted(set(_STORE_FUNCS) - set(store_ty))
    if missing:
        raise OpenError(f"{path} imports {name} without {missing}: not {PACKAGE}@{VERSION}")
    with linker.root() as root:
        with root.add_instance(name) as store:
            for fn_name, fn in _STORE_FUNCS.items():
                _abi.add_host_func(store, fn_name, fn, store_ty[fn_name].ty, f"store#{fn_name}")


def shadow_random(engine: Engine, component: Component, linker: Linker, path: Path) -> None:
    """Replace every ``wasi:random`` function the component imports (in the
    version it imports) with one reading ``os.urandom``: the operating
    system's generator, which no ``fork()`` duplicates."""
    linker.allow_shadowing = True
    imports = component.type.imports(engine)
    with linker.root() as root:
        for name, item in imports.items():
            if not name.startswith("wasi:random/"):
                continue
            funcs = item.ty.exports(engine)
            unknown = sorted(set(funcs) - set(_RANDOM_FUNCS))
            if unknown:
                raise OpenError(f"{path} imports {name} functions this host cannot serve: {unknown}")
            with root.add_instance(name) as inst:
                for fn_name, fn_item in funcs.items():
                    label = f"{name.partition('@')[0]}#{fn_name}"
                    _abi.add_host_func(inst, fn_name, _RANDOM_FUNCS[fn_name], fn_item.ty, label)
    linker.allow_shadowing = False


_COMPILED: dict[tuple[str, int, int], Compiled] = {}
_COMPILED_LOCK = threading.Lock()


def compiled(path: Path) -> Compiled:
    """The compiled component at ``path``, shared by every kernel in the process."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    with _COMPILED_LOCK:
        c = _COMPILED.get(key)
        if c is None:
            c = _COMPILED[key] = Compiled(path)
        return c


class Worker:
    """One instance of the component with its own store session.

    Reused for every call a thread makes (instantiating costs far more than a
    call). A trap leaves it unusable: the kernel drops it and makes a new one.
    """

    def __init__(self, compiled: Compiled, session: Any, clock: Clock) -> None:
        self.compiled = compiled
        self.session = session
        self.clock = clock
        #: Set when the store reported a conflict during the current call:
        #: the call is re-run whatever the component answered.
        self.conflict = False
        #: Set when an import failed in a way the host, not the component,
        #: must account for (a broken clock, a binding defect, a sink
        #: body's caught store error): the call ends with ``storage``.
        self.failure: Optional[str] = None
        #: The fork generation this worker (and its connection) belongs to.
        self.generation = FORKS[0]
        #: Set when a call trapped: the instance must not be used again.
        self.trapped = False
        self.store = Store(compiled.engine)
        wasi = WasiConfig()
        wasi.inherit_stderr()
        # Without WASI state a WASI call aborts the process (wasmtime-py).
        self.store.set_wasi(wasi)
        self.context = _abi.context_address(self.store)
        self.c_context = ctypes.c_void_p(self.context)
        #: This worker's memory for its export calls' arguments (a worker
        #: serves one call at a time): no thread-local lookup per call.
        self.arena = _abi.Arena(slots=True)
        _register(self.context, self)
        try:
            self.instance = compiled.linker.instantiate(self.store, compiled.component)
        except wasmtime.WasmtimeError as e:
            _unregister(self.context)
            raise OpenError(f"instantiating the component: {e}") from e
        self._funcs: dict[str, tuple[Any, _abi.FuncCodec, Any]] = {}

    def call(self, name: str, *args: Any) -> Any:
        """Call export ``interface#function`` with wire-form arguments."""
        return self.call_with(name, args)

    def call_with(self, name: str, args: Any, codec: Optional[_abi.FuncCodec] = None) -> Any:
        """:meth:`call` with the arguments as one sequence (and, given
        ``codec``, the one of Compiled.export: a caller may keep it)."""
        f = self._funcs.get(name) or self._func(name)
        return _abi.call_export(f[0], self.c_context, codec or f[1], args, self.arena)

    def call_lowered(self, name: str, lowered: _abi.Arena, codec: _abi.FuncCodec) -> Any:
        """:meth:`call_with`, the arguments lowered already (into
        ``lowered``'s slots, by :func:`gak._abi.lower_ahead`)."""
        f = self._funcs.get(name) or self._func(name)
        return _abi.call_lowered(f[0], self.c_context, codec, lowered.c_params, self.arena)

    def _func(self, name: str) -> tuple[Any, _abi.FuncCodec, Any]:
        index, codec = self.compiled.export(name)
        func = self.instance.get_func(self.store, index)
        if func is None:
            raise OpenError(f"{name} is not a function")
        # The func is kept: its C handle is what the c_void_p names.
        f = self._funcs[name] = (ctypes.c_void_p(_abi.func_address(func)), codec, func)
        return f

    def close(self) -> None:
        _unregister(self.context)
        _abi.release_result(self.arena)
        try:
            self.session.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


# --- the host side of the imports -----------------------------------------


def _failed(worker: Worker, e: BaseException) -> Any:
    """The store-error for an exception of the binding (never a trap)."""
    if isinstance(e, StoreConflict):
        worker.conflict = True
        return (False, ("conflict", str(e) or "conflict"))
    if isinstance(e, StoreFailure):
        return (False, ("failure", str(e) or "failure"))
    worker.failure = f"store binding failed: {type(e).__name__}: {e}"
    return (False, ("failure", worker.failure))


def _read(ctx: int, reads: tuple[Any, Any, bool, int]) -> Any:
    """``store.read``: the point reads (locked), the range reads (snapshot),
    then the clock (after the reads: the binding's database clock when it
    has one, else the kernel's), then the call's fresh entropy."""
    worker = _WORKERS[ctx]()
    keys, ranges, clock, entropy = reads
    if entropy > MAX_ENTROPY:
        return (False, ("failure", f"{entropy} bytes of entropy asked for in one read; at most {MAX_ENTROPY}"))
    try:
        values, pages, now = worker.session.read(keys, ranges, clock)
    except Exception as e:  # noqa: BLE001 - a trap would kill the instance
        return _failed(worker, e)
    if clock:
        if now is None:
            try:
                now = worker.clock.now()
            except StoreConflict as e:
                worker.conflict = True
                return (False, ("conflict", f"reading the clock: {e}"))
            except Exception as e:  # noqa: BLE001 - the call is failed, not trapped
                worker.failure = f"reading the clock: {type(e).__name__}: {e}"
                return (False, ("failure", worker.failure))
        if type(now) is not int or not 0 <= now <= MAX_NUMBER:
            worker.failure = f"the clock reads {now!r}, not an integer below 2^53 ms"
            return (False, ("failure", worker.failure))
    # Drawn for this call from the operating system: no state in this
    # process that a fork() could hand to two children.
    return (True, (values, pages, now, os.urandom(entropy) if entropy else b""))


def _write(ctx: int, changes: list[tuple[str, str, Optional[str]]]) -> Any:
    """``store.write``: the call's whole write set, once, in its transaction."""
    worker = _WORKERS[ctx]()
    try:
        worker.session.write(changes)
        return _OK
    except Exception as e:  # noqa: BLE001
        return _failed(worker, e)


def _try_read(ctx: int, keys: list[tuple[str, str]]) -> Any:
    """``store.try-read``: point reads that pass over held keys."""
    worker = _WORKERS[ctx]()
    try:
        found = worker.session.try_read(keys)
    except Exception as e:  # noqa: BLE001
        return _failed(worker, e)
    return (True, [_HELD if held else ("found", value) for held, value in found])


_HELD = ("held", None)
_OK = _abi.OK_NONE
_STORE_FUNCS = {"read": _read, "try-read": _try_read, "write": _write}


# --- wasi:random, from the operating system -------------------------------


def _random_bytes(ctx: int, n: int) -> bytes:
    return os.urandom(n)


def _random_u64(ctx: int) -> int:
    return int.from_bytes(os.urandom(8), "little")


def _random_pair(ctx: int) -> tuple[int, int]:
    b = os.urandom(16)
    return (int.from_bytes(b[:8], "little"), int.from_bytes(b[8:], "little"))


# The insecure interfaces (hash-map seeds) are served from the same source:
# it costs nothing and leaves no generator state to copy either.
_RANDOM_FUNCS: dict[str, Callable[..., Any]] = {
    "get-random-bytes": _random_bytes,
    "get-random-u64": _random_u64,
    "get-insecure-random-bytes": _random_bytes,
    "get-insecure-random-u64": _random_u64,
    "insecure-seed": _random_pair,
}
