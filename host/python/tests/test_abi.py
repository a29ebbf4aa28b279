"""The wasmtime-py 50 specifics that gak._abi relies on or works around."""

from __future__ import annotations

import ctypes
from importlib.metadata import version

import pytest
from wasmtime.component import _types as wt

from gak import _abi, _engine
from gak.component import find_component


def test_pinned_wasmtime_version() -> None:
    # gak._abi reads the C API's structs directly: any other version must be
    # re-checked (layouts, ownership) before the pin moves.
    assert version("wasmtime") == _abi.WASMTIME_VERSION == "50.0.1"


def test_struct_layouts_match_the_c_api() -> None:
    ffi = _abi.ffi
    assert ctypes.sizeof(ffi.wasmtime_component_val_t) == 32
    assert ffi.wasmtime_component_val_t.of.offset == 8
    assert ctypes.sizeof(ffi.wasmtime_component_valrecord_entry_t) == 48
    assert ffi.wasmtime_component_valresult_t.val.offset == 8
    assert ffi.wasmtime_component_valvariant_t.val.offset == 16


def _store_get_type() -> object:
    compiled = _engine.compiled(find_component())
    store = compiled.component.type.imports(compiled.engine)["gak:kernel/store@0.2.0"].ty
    return store.exports(compiled.engine)["get"].ty.result


def test_upstream_cannot_return_err_of_result_option_string() -> None:
    """wasmtime-py 50 maps `result<option<string>, store-error>` untagged and
    routes an `err` value into the `ok` case (the option's "anything"
    matches first): a host function could never report a store error.
    gak._abi exists partly for this; when this test fails, upstream fixed it."""
    ty = _store_get_type()
    assert isinstance(ty, wt.ResultType)
    assert not ty._tagged()
    with pytest.raises((TypeError, ValueError)):
        ty._lower(None, wt.Variant("conflict", "busy"))  # type: ignore[arg-type]


def test_our_codec_keeps_results_tagged() -> None:
    codec = _abi.codec_of(_store_get_type())
    for value in [(True, None), (True, "{}"), (True, "é" * 300), (False, ("conflict", "busy")), (False, ("failure", ""))]:
        arena = _abi.Arena()
        at = arena.alloc(32)
        codec.lower(value, arena, at)
        assert codec.lift(at) == value


def test_u64_is_range_checked_before_lowering() -> None:
    codec = _abi._U64Codec()
    arena = _abi.Arena()
    at = arena.alloc(32)
    for bad in (-1, 1 << 64):
        with pytest.raises(_abi.ArgError):
            codec.lower(bad, arena, at)
    with pytest.raises(TypeError):
        codec.lower(True, arena, at)
    codec.lower((1 << 64) - 1, arena, at)
    assert codec.lift(at) == (1 << 64) - 1


def test_memory_view_reads_what_ctypes_reads() -> None:
    data = ctypes.create_string_buffer(b"gak\x00\xff", 5)
    addr = ctypes.addressof(data)
    assert _abi.MEM[addr - _abi._BASE : addr - _abi._BASE + 5].tobytes() == b"gak\x00\xff"
