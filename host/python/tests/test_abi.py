"""The wasmtime-py 50 specifics that gak._abi relies on or works around."""

from __future__ import annotations

import ctypes
from importlib.metadata import version
from pathlib import Path

import pytest
import wasmtime
from wasmtime.component import Component
from wasmtime.component import _types as wt

from gak import _abi, _codecs, _engine, _layout, _mem, _store_abi
from gak.component import find_component


def test_pinned_wasmtime_version() -> None:
    # gak._abi reads the C API's structs directly: any other version must be
    # re-checked (layouts, ownership) before the pin moves.
    assert version("wasmtime") == _abi.WASMTIME_VERSION == "50.0.1"


def test_struct_layouts_match_the_c_api() -> None:
    """The layout the generated modules are written against (gak._layout,
    from the generator's table) is wasmtime-py's (gak._mem asserts it at
    import too)."""
    from wasmtime import _ffi as ffi

    assert ctypes.sizeof(ffi.wasmtime_component_val_t) == _layout.VAL == 32
    assert ffi.wasmtime_component_val_t.of.offset == _layout.PAYLOAD == 8
    assert ctypes.sizeof(ffi.wasmtime_component_valrecord_entry_t) == _layout.ENTRY == 48
    assert ffi.wasmtime_component_valrecord_entry_t.val.offset == _layout.ENTRY_VAL == 16
    assert ffi.wasmtime_component_valresult_t.val.offset == 8
    assert ffi.wasmtime_component_valvariant_t.val.offset == 16
    for kind in ("BOOL", "U8", "U32", "U64", "STRING", "LIST", "RECORD", "TUPLE", "VARIANT", "ENUM", "OPTION", "RESULT"):
        assert getattr(ffi, f"WASMTIME_COMPONENT_{kind}").value == getattr(_layout, kind), kind


GOLDEN_0_2 = Path(__file__).resolve().parents[3] / "tests" / "golden" / "gak-0.2.0.wasm"


def _old_store_get_type() -> object:
    """``result<option<string>, store-error>``: 0.2.0's ``store.get`` (read
    from the real 0.2.0 component; 0.3.0 has no such type, but wasmtime-py
    still maps it wrongly, and this pins that)."""
    if not GOLDEN_0_2.is_file():
        pytest.skip(f"{GOLDEN_0_2} is not here (outside the repository)")
    engine = wasmtime.Engine()
    component = Component(engine, GOLDEN_0_2.read_bytes())
    store = component.type.imports(engine)["gak:kernel/store@0.2.0"].ty
    return store.exports(engine)["get"].ty.result


def _store_types() -> dict[str, object]:
    compiled = _engine.compiled(find_component())
    store = compiled.component.type.imports(compiled.engine)[f"gak:kernel/store@{_engine.VERSION}"].ty
    return {name: item.ty for name, item in store.exports(compiled.engine).items()}


def test_upstream_cannot_return_err_of_result_option_string() -> None:
    """wasmtime-py 50 maps `result<option<string>, store-error>` untagged and
    routes an `err` value into the `ok` case (the option's "anything"
    matches first): a host function could never report a store error.
    gak._abi exists partly for this; when this test fails, upstream fixed it."""
    ty = _old_store_get_type()
    assert isinstance(ty, wt.ResultType)
    assert not ty._tagged()
    with pytest.raises((TypeError, ValueError)):
        ty._lower(None, wt.Variant("conflict", "busy"))  # type: ignore[arg-type]


def _round_trip(codec: _codecs.Codec, value: object) -> object:
    arena = _mem.Arena()
    at = arena.alloc(32)
    codec.lower(value, arena, at)
    return codec.lift(at)


def test_our_codec_keeps_results_tagged() -> None:
    codec = _codecs.codec_of(_old_store_get_type())
    for value in [(True, None), (True, "{}"), (True, "é" * 300), (False, ("conflict", "busy")), (False, ("failure", ""))]:
        assert _round_trip(codec, value) == value


def test_the_store_imports_are_read_try_read_and_write_only() -> None:
    types = _store_types()
    assert {n for n, t in types.items() if isinstance(t, wt.FuncType)} == {"read", "try-read", "write"}


def test_try_read_answers_round_trip() -> None:
    """``result<list<probe>, store-error>``: what the host's ``try-read``
    answers (held keys and found ones, absent or not) reads back as sent."""
    codec = _codecs.codec_of(_store_types()["try-read"].result)  # type: ignore[attr-defined]
    for value in [
        (True, []),
        (True, [("held", None), ("found", "{}"), ("found", None), ("found", "é" * 300)]),
        (False, ("conflict", "busy")),
    ]:
        assert _round_trip(codec, value) == value


def test_read_answers_round_trip() -> None:
    """``result<answers, store-error>``: the generated lowering (one block
    of Vals for the usual answer, the general lowering for any other
    ``ok``) reads back as the generic codec lifts it; an ``err`` is left to
    the codec."""
    fty = _store_types()["read"]
    codec = _codecs.codec_of(fty.result)  # type: ignore[attr-defined]
    lower = _store_abi.LOWER_RESULTS["store#read"]
    arena = _mem.Arena(slots=True, block=_store_abi.BLOCK_SIZE)
    _store_abi.prepare_block(arena.block)
    for value in [
        (True, ([], [], None, b"")),
        (True, (["{}", None, "é" * 300, ""], [], 42, bytes(range(16)))),
        (True, ([None], [[("a", "{}"), ("é/\U0001f600", "x" * 5000)], [], [("", "")]], (1 << 53) - 1, b"\x00" * 64)),
    ]:
        c = lower(value, arena.reset())
        assert c is not None
        assert codec.lift(c.value) == value
    for err in [(False, ("conflict", "busy")), (False, ("failure", ""))]:
        assert lower(err, arena.reset()) is None
        assert _round_trip(codec, err) == err


def test_reads_and_changes_lift_as_the_generic_codecs() -> None:
    """The host receives ``reads`` and ``list<change>`` through generated
    lifts (lists of records in one loop, a table's name by two bytes);
    what they lift is what the generic codecs lift."""
    types = _store_types()
    (_, reads_ty), = types["read"].params  # type: ignore[attr-defined]
    (_, changes_ty), = types["write"].params  # type: ignore[attr-defined]
    reads = _codecs.codec_of(reads_ty)
    changes = _codecs.codec_of(changes_ty)
    lift_reads = _store_abi.LIFT_ARGS["store#read"]
    lift_changes = _store_abi.LIFT_ARGS["store#write"]
    value = (
        [("tasks", "t1"), ("meta", "taskboard"), ("indexes", "é\U0001f600"), ("snapshots", "")],
        [("indexes", "q/", None, 32), ("tasks", "", "t9", 0), ("outcomes", "é", "", 4_294_967_295)],
        True,
        16,
    )
    one = ([("tasks", "t1")], [("indexes", "q/", "q/1", 5)], False, 0)
    for v in [value, one, ([], [], False, 0)]:
        arena = _mem.Arena()
        at = arena.alloc(32)
        reads.lower(v, arena, at)
        assert lift_reads(at) == reads.lift(at) == v
    for c in [[("tasks", "a", "{}"), ("indexes", "q/1", None), ("sinks", "é" * 100, "")], [("meta", "m", None)], []]:
        arena = _mem.Arena()
        at = arena.alloc(32)
        changes.lower(c, arena, at)
        assert lift_changes(at) == changes.lift(at) == c


def test_u64_is_range_checked_before_lowering() -> None:
    codec = _codecs.U64()
    arena = _mem.Arena()
    at = arena.alloc(32)
    for bad in (-1, 1 << 64):
        with pytest.raises(_codecs.ArgError):
            codec.lower(bad, arena, at)
    with pytest.raises(TypeError):
        codec.lower(True, arena, at)
    codec.lower((1 << 64) - 1, arena, at)
    assert codec.lift(at) == (1 << 64) - 1


def test_memory_view_reads_what_ctypes_reads() -> None:
    data = ctypes.create_string_buffer(b"gak\x00\xff", 5)
    addr = ctypes.addressof(data)
    assert _mem.MEM[addr : addr + 5].tobytes() == b"gak\x00\xff"
    word = ctypes.create_string_buffer(b"gak\x00\xff\x01\x02\x03", 8)
    at = ctypes.addressof(word)
    assert at % 8 == 0  # malloc'd: aligned, as every word of a Val is
    assert _mem.MEMQ[at >> 3] == int.from_bytes(word.raw, "little")


def test_upstream_u64_is_not_range_checked() -> None:
    """wasmtime-py 50 lowers -1 as a u64 by wrapping it (ctypes), so -1 ms
    would become a 584-million-year ttl; gak checks ranges itself."""
    raw = _abi.Val()
    wt.U64().convert_to_c(None, -1, ctypes.pointer(raw))  # type: ignore[arg-type]
    assert raw.of.u64 == (1 << 64) - 1


_NO_WASI_CALL = """
import sys
import wasmtime
from wasmtime.component import Linker
from gak import _abi, _engine, ManualClock
from gak.component import find_component
from gak.stores.memory import MemoryBackend
c = _engine.compiled(find_component())
if sys.argv[1] == "upstream":  # wasmtime-wasi's own wasi:random
    linker = Linker(c.engine)
    linker.add_wasip2()
    _engine.link_kernel_imports(c.engine, c.component, linker, c.path)
else:  # the kernel's linker
    linker = c.linker
store = wasmtime.Store(c.engine)  # no set_wasi
inst = linker.instantiate(store, c.component)
print("instantiated", flush=True)
w = _engine.Worker.__new__(_engine.Worker)
w.session, w.clock, w.conflict, w.failure = MemoryBackend().session(), ManualClock(5), False, None
_engine._register(_abi.context_address(store), w)

def call(name, *args):
    idx, codec = c.export(name)
    f = inst.get_func(store, idx)
    w.session.begin()
    try:
        return _abi.call(_abi.func_address(f), _abi.context_address(store), codec, args)
    finally:
        w.session.commit()

# Seeding builds a hash set of the ids: the Rust standard library seeds it
# from wasi:random (insecure-seed).
call("taskboard#seed", [("t1", "", [], None, None, None, None, None), ("t2", "", ["t1"], None, None, None, None, None)])
print("seeded", flush=True)
ok, got = call("sideeffect#acquire", ("k", "r", "safe", None), 10)  # a grant mints a holder
print("survived", got.lease.holder, flush=True)
"""


def _no_wasi_call(linker: str) -> "subprocess.CompletedProcess[str]":
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", _NO_WASI_CALL, linker], capture_output=True, text=True, timeout=60
    )


def test_upstream_store_without_wasi_aborts_the_process() -> None:
    """wasmtime-wasi serves wasi:random from the store's WASI state: without
    set_wasi(WasiConfig()) the first call that draws from it aborts the
    whole process (checked in a child)."""
    out = _no_wasi_call("upstream")
    assert "instantiated" in out.stdout and "seeded" not in out.stdout
    assert out.returncode == -6, (out.returncode, out.stderr[-500:])  # SIGABRT, not a Python error


def test_the_kernels_randomness_is_not_wasmtime_wasis() -> None:
    """HOSTS.md rule 7: the kernel's linker shadows wasi:random with
    os.urandom and mints holders from the entropy `store.read` hands over
    (os.urandom too), so no call reads wasmtime-wasi's generator (whose
    state fork() copies): the same calls survive without WASI state."""
    out = _no_wasi_call("kernel")
    assert out.returncode == 0, out.stderr[-500:]
    holder = out.stdout.split("survived ")[1].strip()
    assert len(holder) == 32


RECORDS = {
    # (export, where the record is) → field names in the order gak.interfaces sends them
    "taskboard#claim": [
        "id",
        "title",
        "deps",
        "state",
        "owner",
        "token",
        "until",
        "fence",
        "priority",
        "not-before",
        "max-attempts",
        "group",
        "attempts",
        "last-error",
    ],
    "taskboard#get-group": ["limit", "live"],
    "checkpoint#load": ["run-id", "seq", "fence", "status", "done", "fields"],
    "retention#prune": ["removed-keys", "removed-tasks", "removed-runs", "more"],
    "sideeffect#get": [
        "key",
        "state",
        "retry-safety",
        "fingerprint",
        "resource",
        "until",
        "reason",
        "completed-at",
        "reconciling-until",
    ],
    "sideeffect#begin-reconcile": ["claim", "until"],
}


@pytest.mark.parametrize("export", sorted(RECORDS))
def test_record_fields_keep_the_order_the_api_relies_on(export: str) -> None:
    compiled = _engine.compiled(find_component())
    _, codec = compiled.export(export)
    ok = codec.result.ok  # type: ignore[union-attr]
    assert [n.decode() for n in ok.names] == RECORDS[export]


@pytest.mark.parametrize(
    ("export", "param", "names"),
    [
        ("sideeffect#acquire", 0, ["key", "resource", "retry-safety", "fingerprint"]),
        ("sideeffect#complete", 1, ["key", "resource", "fence", "holder", "until"]),
        ("sideeffect#resolve-uncertain", 1, ["applied", "result", "force-retryable", "claim"]),
        ("commitgate#commit", 3, ["status", "result"]),
    ],
)
def test_argument_records_keep_their_order(export: str, param: int, names: list[str]) -> None:
    compiled = _engine.compiled(find_component())
    _, codec = compiled.export(export)
    assert [n.decode() for n in codec.params[param].names] == names
