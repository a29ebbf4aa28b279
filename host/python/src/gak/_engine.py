"""The wasmtime embedding: one engine, compiled component and linker per
component file and process; per-worker instances binding the store and
clock imports to a session.

Host functions are defined once on a shared linker; each call finds its
worker by the store context it runs in (:data:`_WORKERS`).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, Optional

import wasmtime
from wasmtime import Engine, Store, WasiConfig
from wasmtime.component import Component, Linker

from . import _abi
from .clock import Clock
from .errors import OpenError
from .stores.base import StoreConflict, StoreFailure

PACKAGE = "gak:kernel"
VERSION = "0.2.0"
#: Integers the contract accepts stay below 2**53 (every host language
#: represents them exactly); a clock past that is broken.
MAX_NUMBER = (1 << 53) - 1

#: Live workers by store context address, for the host functions.
_WORKERS: dict[int, "Worker"] = {}

#: The process generation: bumped in a forked child, so pools can tell the
#: parent's workers (its connections, its random state) without a syscall.
FORKS = [0]


def _forked() -> None:
    FORKS[0] += 1
    _WORKERS.clear()


os.register_at_fork(after_in_child=_forked)


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
    """Engine, component, linker and the per-function codecs (built once)."""

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
        self.linker = Linker(self.engine)
        self.linker.add_wasip2()
        imports = self.component.type.imports(self.engine)
        try:
            store_ty = imports[f"{PACKAGE}/store@{VERSION}"].ty.exports(self.engine)
            clock_ty = imports[f"{PACKAGE}/clock@{VERSION}"].ty.exports(self.engine)
        except KeyError as e:
            raise OpenError(f"{path} is not gak:kernel@{VERSION} (no import {e})") from e
        with self.linker.root() as root:
            with root.add_instance(f"{PACKAGE}/store@{VERSION}") as store:
                for name, fn in _STORE_FUNCS.items():
                    _abi.add_host_func(store, name, fn, store_ty[name].ty)
            with root.add_instance(f"{PACKAGE}/clock@{VERSION}") as clock:
                _abi.add_host_func(clock, "now", _clock_now, clock_ty["now"].ty)
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
            found = (index, _abi.FuncCodec(fty))
            self._funcs[name] = found
            return found


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
        #: Set when an import failed in a way the component cannot see (the
        #: clock): the call ends with ``storage``.
        self.failure: Optional[str] = None
        self.pid = FORKS[0]
        self.store = Store(compiled.engine)
        wasi = WasiConfig()
        wasi.inherit_stderr()
        # Without WASI state the first `wasi:random` call aborts the process.
        self.store.set_wasi(wasi)
        self.context = _abi.context_address(self.store)
        _WORKERS[self.context] = self
        try:
            self.instance = compiled.linker.instantiate(self.store, compiled.component)
        except wasmtime.WasmtimeError as e:
            _WORKERS.pop(self.context, None)
            raise OpenError(f"instantiating the component: {e}") from e
        self._funcs: dict[str, tuple[int, _abi.FuncCodec, Any]] = {}

    def call(self, name: str, *args: Any) -> Any:
        """Call export ``interface#function`` with wire-form arguments."""
        f = self._funcs.get(name)
        if f is None:
            index, codec = self.compiled.export(name)
            func = self.instance.get_func(self.store, index)
            if func is None:
                raise OpenError(f"{name} is not a function")
            f = self._funcs[name] = (_abi.func_address(func), codec, func)
        return _abi.call(f[0], self.context, f[1], args)

    def close(self) -> None:
        _WORKERS.pop(self.context, None)
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


def _get(ctx: int, table: str, key: str) -> Any:
    worker = _WORKERS[ctx]
    try:
        value = worker.session.get(table, key)
        return _OK if value is None else (True, value)
    except Exception as e:  # noqa: BLE001 - a trap would kill the instance
        return _failed(worker, e)


def _get_many(ctx: int, keys: list[tuple[str, str]]) -> Any:
    worker = _WORKERS[ctx]
    try:
        return (True, worker.session.get_many(keys))
    except Exception as e:  # noqa: BLE001
        return _failed(worker, e)


def _put(ctx: int, table: str, key: str, value: str) -> Any:
    worker = _WORKERS[ctx]
    try:
        worker.session.put(table, key, value)
        return _OK
    except Exception as e:  # noqa: BLE001
        return _failed(worker, e)


def _delete(ctx: int, table: str, key: str) -> Any:
    worker = _WORKERS[ctx]
    try:
        worker.session.delete(table, key)
        return _OK
    except Exception as e:  # noqa: BLE001
        return _failed(worker, e)


def _scan(ctx: int, table: str, prefix: str, after: Optional[str], limit: int) -> Any:
    worker = _WORKERS[ctx]
    try:
        return (True, worker.session.scan(table, prefix, after, limit))
    except Exception as e:  # noqa: BLE001
        return _failed(worker, e)


_OK = _abi.OK_NONE
_STORE_FUNCS = {"get": _get, "get-many": _get_many, "put": _put, "delete": _delete, "scan": _scan}


def _clock_now(ctx: int) -> int:
    worker = _WORKERS[ctx]
    try:
        db = worker.session.now()
        now = worker.clock.now() if db is None else db
    except StoreConflict as e:
        worker.conflict = True
        worker.failure = f"reading the database clock: {e}"
        return 0
    except Exception as e:  # noqa: BLE001 - the call is failed, not trapped
        worker.failure = f"reading the clock: {type(e).__name__}: {e}"
        return 0
    if type(now) is not int or not 0 <= now <= MAX_NUMBER:
        worker.failure = f"the clock reads {now!r}, not an integer below 2^53 ms"
        return 0
    return now
