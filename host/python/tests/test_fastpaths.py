"""The hot path's shortcuts agree with what they stand in for: the code
generated from the WIT per export (arguments lowered with one pack, results
lifted with one unpack per record, texts handed over in place) with the
codec objects, the read answer's one-pack block with the generic codec, the
admission fast path with the full walk of gak.limits, and gak._new's
constructors with the dataclasses' own."""

from __future__ import annotations

import dataclasses
import enum
import re
import sys
import typing
from typing import Any, Iterator

import pytest

from gak import _abi, _codecs, _engine, _layout, _lower, _mem, _new, _signatures, _store_abi, types
from gak.component import find_component
from gak.errors import OpenError
from gak.limits import MAX_TOTAL, MAX_VALUE, _flat_within, _walk, oversized
from gak.types import Granted, KeyInfo, KeyState, Lease, RetrySafety, TaskState

_TEXTS = ["", "t1", "".join(["run", "-", "7"]), "é", "\U0001f600 x", "k" * 5000, "ünïcödé" * 300]


def _samples(codec: _codecs.Codec, i: int) -> Any:
    """The ``i``-th of several values of ``codec``'s type (cycling through
    edge cases: empty and long texts, non-ASCII, bounds, absent options)."""
    t = type(codec)
    if t is _codecs.String:
        return _TEXTS[i % len(_TEXTS)]
    if t is _codecs.U64:
        return [0, 1, (1 << 53) - 1, (1 << 64) - 1, 60_000][i % 5]
    if t is _codecs.U32:
        return [0, 1, (1 << 32) - 1, 100][i % 4]
    if t is _codecs.S32:
        return [0, -1, (1 << 31) - 1, -(1 << 31), 7][i % 5]
    if t is _codecs.U8:
        return [0, 255, 16][i % 3]
    if t is _codecs.Bool:
        return i % 2 == 0
    if t is _codecs.Enum:
        names = sorted(codec.names)  # type: ignore[attr-defined]
        return names[i % len(names)]
    if t is _codecs.Bytes:
        return [b"", b"\x00\xff", bytes(range(256)), b"ok"][i % 4]
    if t is _codecs.Option:
        return None if i % 3 == 0 else _samples(codec.inner, i // 3 + i)  # type: ignore[attr-defined]
    if t is _codecs.Record:
        return tuple(_samples(f, i + j) for j, f in enumerate(codec.fields))  # type: ignore[attr-defined]
    if t is _codecs.Tuple:
        return tuple(_samples(e, i + j) for j, e in enumerate(codec.elems))  # type: ignore[attr-defined]
    if t is _codecs.List:
        return [_samples(codec.elem, i + j) for j in range(i % 3)]  # type: ignore[attr-defined]
    if t is _codecs.Result:
        ok, err = codec.ok, codec.err  # type: ignore[attr-defined]
        if i % 4 == 3:
            return (False, None if err is None else _samples(err, i))
        return (True, None if ok is None else _samples(ok, i))
    if t is _codecs.Variant:
        cases = sorted(codec.cases.items())  # type: ignore[attr-defined]
        tag, (_, c) = cases[i % len(cases)]
        return (tag, None if c is None else _samples(c, i))
    raise AssertionError(f"no samples for {t.__name__}")


def _exports() -> Iterator[tuple[str, _abi.FuncCodec]]:
    compiled = _engine.compiled(find_component())
    for qualified, item in compiled.component.type.exports(compiled.engine).items():
        iface = qualified.partition("/")[2].partition("@")[0]
        for fn, member in item.ty.exports(compiled.engine).items():
            if hasattr(member.ty, "params"):  # functions, not the types the interface exports
                yield f"{iface}#{fn}", compiled.export(f"{iface}#{fn}")[1]


EXPORTS = sorted(_exports(), key=lambda e: e[0])


def _params(arena: _mem.Arena, codec: _abi.FuncCodec) -> list[Any]:
    """The parameter Vals in an arena's slots, lifted by the codecs."""
    return [c.lift(arena.slots + _layout.VAL * (1 + i)) for i, c in enumerate(codec.params)]


def test_every_export_has_generated_code() -> None:
    assert {name for name, _ in EXPORTS} == set(_lower.LOWER) == set(_signatures.SIGNATURES) - {"store#read", "store#try-read", "store#write"}
    for name, codec in EXPORTS:
        assert codec.lower_args is _lower.LOWER[name][0], name


@pytest.mark.parametrize("zero_copy", [True, False], ids=["in-place", "copied"])
@pytest.mark.parametrize(("name", "codec"), EXPORTS, ids=[e[0] for e in EXPORTS])
def test_generated_lowering_writes_what_the_codecs_write(
    name: str, codec: _abi.FuncCodec, zero_copy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if zero_copy and not _mem.ZERO_COPY:
        pytest.skip("this interpreter's strings are not laid out as gak._layout says")
    monkeypatch.setattr(_lower, "ZERO_COPY", zero_copy)
    monkeypatch.setattr(_mem, "ZERO_COPY", zero_copy)  # Arena.hold: keep or copy
    lower = codec.lower_args
    assert lower is not None
    for i in range(12):
        args = tuple(_samples(c, i) for c in codec.params)
        fast, slow = _mem.Arena(slots=True), _mem.Arena(slots=True)
        _mem.MEM[fast.slots] = 0xFF  # the result slot: what the last call left there
        assert lower(args, fast) is True
        assert _mem.MEM[fast.slots] == 0xFF  # left alone: wasmtime drops it when it assigns the next
        _abi._lower_with_codecs(codec, args, slow)
        assert _params(fast, codec) == _params(slow, codec) == list(args)


def _kebab(cls: type) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", cls.__name__).lower()


#: The variants' case classes (``Granted``) by class: their WIT case name.
_CASES = {cls: _kebab(cls) for union in (types.Acquired, types.Resolved) for cls in typing.get_args(union)}


def _wire(v: Any) -> Any:
    """What the API built (dataclasses, members, dicts), as the generic
    codecs lift it (tuples in the WIT's field order, names, pairs)."""
    if type(v) in _CASES:
        payload = [getattr(v, f.name) for f in dataclasses.fields(v)]
        return (_CASES[type(v)], _wire(payload[0]) if payload else None)
    if dataclasses.is_dataclass(v):
        return tuple(_wire(getattr(v, f.name)) for f in dataclasses.fields(v))
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, dict):
        return [(k, _wire(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [_wire(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_wire(x) for x in v)
    return v


@pytest.mark.parametrize(("name", "codec"), EXPORTS, ids=[e[0] for e in EXPORTS])
def test_generated_lifting_builds_what_the_codecs_read(name: str, codec: _abi.FuncCodec) -> None:
    """Every export's generated lift builds the API's types from what the
    generic codecs read as tuples: the same values, field by field."""
    assert codec.result is not None and codec.lift_result is not None
    seen = set()
    for i in range(16):
        value = _samples(codec.result, i)
        arena = _mem.Arena()
        at = arena.alloc(_layout.VAL)
        codec.result.lower(value, arena, at)
        got = codec.lift_result(at)
        assert _wire(got) == codec.result.lift(at) == value
        seen.add(type(got[1]).__name__)
    if name == "sideeffect#acquire":
        assert {"Granted", "Replayed", "InFlight", "tuple"} <= seen, seen  # errors stay tuples
    if name in ("taskboard#claim", "taskboard#get"):
        assert {"Task", "tuple"} <= seen, seen


@pytest.mark.parametrize(
    "args",
    [
        ("a", "\ud800", 1),  # a lone surrogate: the codecs' ArgError
        ("a", "w", 1 << 64),  # out of range
        ("a", "w", True),  # a bool is no u64 (TypeError)
        ("a", "w", -1),
        (type("S", (str,), {})("a"), "w", 1),  # a str subclass: not compact, sent by the codecs
        ("a", "w"),  # too few
        ("x" * (MAX_VALUE + 1), "w", 1),  # too long to take (the walk refuses it before)
    ],
    ids=["surrogate", "u64-overflow", "bool", "negative", "str-subclass", "arity", "too-long"],
)
def test_generated_lowering_declines_what_it_does_not_take(args: tuple[Any, ...]) -> None:
    codec = dict(EXPORTS)["taskboard#claim"]
    assert codec.lower_args is not None
    assert codec.lower_args(args, _mem.Arena(slots=True)) is None
    arena = _mem.Arena(slots=True)
    if (isinstance(args[0], str) and type(args[0]) is not str) or len(args[0]) > MAX_VALUE:
        _abi._lower_with_codecs(codec, args, arena)  # the codecs send it
        assert _params(arena, codec) == list(args)
    else:
        with pytest.raises((_codecs.ArgError, TypeError, IndexError)):
            _abi._lower_with_codecs(codec, args, arena)


def test_generated_lowering_of_lists_declines_a_bad_item() -> None:
    """A list is lowered item by item: an item the lowering does not take
    (here an enum name the contract does not have) declines the whole
    call, and the codecs raise the error."""
    codec = dict(EXPORTS)["taskboard#seed"]
    good = [("a", None, [], None, None, None, None, None), ("b", "title", ["a"], "open", -3, 5, 2, "g")]
    assert codec.lower_args is not None
    assert codec.lower_args((good,), _mem.Arena(slots=True)) is True
    bad = good + [("c", None, [], "nonsense", None, None, None, None)]
    assert codec.lower_args((bad,), _mem.Arena(slots=True)) is None
    with pytest.raises(_codecs.ArgError):
        _abi._lower_with_codecs(codec, (bad,), _mem.Arena(slots=True))


def test_text_is_handed_over_in_place_only_when_compact_ascii() -> None:
    arena = _mem.Arena()
    ascii_ = "".join(["ab", "c"])
    n, at = _codecs.text(arena, ascii_)
    assert (n, at) == (3, id(ascii_) + _layout.STR_DATA) or not _mem.ZERO_COPY
    for text in ["é" * 3, type("S", (str,), {})("abc"), ""]:
        n, at = _codecs.text(arena, text)
        assert _mem.MEM[at : at + n].tobytes() == str(text).encode()
    assert _mem.ZERO_COPY == _mem._layout_holds()
    if sys.implementation.name == "cpython" and sys.version_info < (3, 14) and not hasattr(sys, "_is_gil_enabled"):
        assert _mem.ZERO_COPY  # the interpreters this package is tested on


def _read_codec() -> _abi.FuncCodec:
    compiled = _engine.compiled(find_component())
    store = compiled.component.type.imports(compiled.engine)[f"gak:kernel/store@{_engine.VERSION}"].ty
    return _abi.FuncCodec(store.exports(compiled.engine)["read"].ty, "store#read")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ((True, ([], [], None, b"")), "block"),
        ((True, (['{"v":1}'], [], 1_796_180_824_502, bytes(range(16)))), "block"),
        ((True, ([None, "é" * 300, "".join(["{", "}"]), ""], [], (1 << 64) - 1, b"\x00" * 64)), "block"),
        ((True, ([None], [[("a", "{}")]], 5, b"")), "general"),  # pages
        ((True, (["1", "2", "3", "4", "5"], [], 5, b"")), "general"),  # five values
        ((True, (["1"], [], 5, bytes(65))), "general"),  # more entropy than the block holds
        ((True, (["1"], [], 5, bytearray(b"x"))), "codec"),  # not bytes
        ((False, ("conflict", "busy")), "codec"),
    ],
)
def test_answers_lowered_into_the_block_read_back_as_sent(value: Any, path: str) -> None:
    codec = _read_codec()
    assert codec.lower_result is _store_abi.LOWER_RESULTS["store#read"]
    arena = _mem.Arena(8192, slots=True, block=_store_abi.BLOCK_SIZE)
    _store_abi.prepare_block(arena.block)
    for _ in range(2):  # the second time over what the first left in the block
        c = codec.lower_result(value, arena.reset())
        assert {"block": arena.c_block, "general": arena.c_out, "codec": None}[path] is c
        if c is None:
            c = codec.lower_generic(value, arena.reset())
        assert codec.result.lift(c.value) == _plain(value)  # type: ignore[union-attr]


def _plain(v: Any) -> Any:
    return bytes(v) if isinstance(v, bytearray) else tuple(_plain(x) for x in v) if isinstance(v, tuple) else v


def test_the_admission_fast_path_never_passes_what_the_walk_refuses() -> None:
    big = "x" * MAX_VALUE
    cases: list[tuple[Any, ...]] = [
        ("t1", "w", 60_000),
        (("k", "r", "safe", None), 1),
        (big, "w", 1),
        (big + "x", "w", 1),
        ("é" * (MAX_VALUE // 2 + 1),),
        ("\ud800",),
        ((1 << 64) - 1,),
        (1 << 64,),
        (-1,),
        (-(1 << 31),),  # an s32's lowest (a priority)
        (-(1 << 31) - 1,),
        (True, None, False),
        (("a", (1 << 64)),),
        (("a", ["nested"]),),
        ([1, 2],),
        (b"bytes",),
        tuple(big for _ in range(8)),
        (TaskState.OPEN,),
    ]
    for args in cases:
        for each in (True, False):
            walked = _walk(args, each)
            assert oversized(args, each) == walked, args[:1]
            if _flat_within(args, MAX_VALUE if each else MAX_TOTAL):
                assert walked is None
    assert oversized((big + "x", "w", 1)) is not None
    assert oversized(("t1", "w", 60_000)) is None
    # Negative ints reach the codecs (an s32 takes them; a u64 refuses them
    # there, as invalid-input); below every integer of the contract they
    # are refused here.
    assert oversized(([("t", None, [], None, -(1 << 31), None, None, None)],)) is None
    assert oversized(([("t", None, [], None, -(1 << 31) - 1, None, None, None)],)) is not None


def test_constructors_build_the_same_instances() -> None:
    """Each of gak._new's constructors builds what the class's own
    ``__init__`` builds from the same fields (values made from the fields,
    so a field the WIT adds needs no edit here)."""
    for name, make in vars(_new).items():
        if not name.startswith("new_"):
            continue
        cls = make.__globals__[make.__annotations__["return"]]
        fields = {f.name: f"{f.name}-{i}" for i, f in enumerate(dataclasses.fields(cls))}
        made, built = make(*fields.values()), cls(**fields)
        assert type(made) is cls and made == built and repr(made) == repr(built), name
        if cls.__dataclass_params__.frozen:
            assert hash(made) == hash(built), name
            with pytest.raises(AttributeError):
                setattr(made, "x", 1)  # still frozen
    lease = ("k", "r", 3, "holder", 99)
    assert _new.new_granted(_new.new_lease(*lease)) == Granted(Lease(*lease))
    info = ("k", KeyState.CLEARED, RetrySafety.SAFE, None, "r", None, None, None, None)
    assert _new.new_key_info(*info) == KeyInfo(*info)


def test_constructors_cover_every_answer_class_and_skip_nothing_init_does() -> None:
    """gak._new fills ``__dict__`` instead of calling ``__init__``: right
    only for classes whose ``__init__`` does nothing more (no
    ``__post_init__``, no slots, no field a default factory computes for an
    answer), which every dataclass of gak.types is."""
    made = {name[len("new_") :] for name in vars(_new) if name.startswith("new_")}
    for cls in vars(types).values():
        if dataclasses.is_dataclass(cls) and isinstance(cls, type):
            assert not hasattr(cls, "__post_init__") and "__slots__" not in vars(cls), cls
    for name, fn in vars(_new).items():
        if name.startswith("new_"):
            cls = fn.__globals__[fn.__annotations__["return"]]
            params = fn.__code__.co_varnames[: fn.__code__.co_argcount]
            assert [p.rstrip("_") for p in params] == [f.name for f in dataclasses.fields(cls)], name
    assert {"task", "lease", "granted", "in_flight", "key_page", "pruned", "snapshot"} <= made


@pytest.mark.parametrize(
    ("rebuild_min", "tidy_every", "added_max"),
    [(1024, 256, 1024), (0, 4, 0), (10**9, 1 << 30, 10**9)],
    ids=["defaults", "rebuild-and-tidy-often", "one-by-one-never-compacted"],
)
def test_memory_range_reads_see_the_order_after_any_commits(
    rebuild_min: int, tidy_every: int, added_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory binding keeps a table's key order lazily (tombstones for
    deleted keys, new keys caught up by a range read or a tidy, one by one
    or by a rebuild): interleaved puts, deletes (of keys put since the last
    range read, of older ones, and of keys put again), rollbacks and range
    reads answer what a sorted reference answers."""
    import random

    from gak.stores import memory
    from gak.stores.memory import MemoryBackend

    monkeypatch.setattr(memory, "_REBUILD_MIN", rebuild_min)
    monkeypatch.setattr(memory, "_TIDY_EVERY", tidy_every)
    monkeypatch.setattr(memory, "_ADDED_MAX", added_max)
    rnd = random.Random(7)
    backend = MemoryBackend()
    session = backend.session()
    reference: dict[str, str] = {}
    for step in range(3_000):
        session.begin()
        changes = {}
        for _ in range(rnd.randint(1, 6)):
            key = f"{rnd.choice(['q/', 'ts/open/', 'ts/claimed/', 'é/'])}{rnd.randint(0, 60):03d}"
            changes[key] = None if rnd.random() < 0.4 else f"v{step}"
        session.write([("indexes", k, v) for k, v in changes.items()])
        if rnd.random() < 0.15:
            session.rollback()
        else:
            session.commit()
            for k, v in changes.items():
                if v is None:
                    reference.pop(k, None)
                else:
                    reference[k] = v
        if rnd.random() < 0.3:
            prefix = rnd.choice(["", "q/", "ts/", "ts/open/", "é/"])
            after = rnd.choice([None, f"{prefix}030", prefix])
            limit = rnd.randint(1, 40)
            session.begin()
            page = session.scan("indexes", prefix, after, limit)
            session.rollback()
            want = sorted((k, v) for k, v in reference.items() if k.startswith(prefix) and (after is None or k > after))
            assert page == want[:limit], (step, prefix, after, limit)
    assert backend.dump() == {("indexes", k): v for k, v in reference.items()}


def test_lowering_ahead_covers_only_what_it_bounds() -> None:
    """A call is lowered before its transaction only by a lowering that
    bounds every size the limits would: exports with lists or bytes are
    checked by the walk first."""
    codecs = dict(EXPORTS)
    assert codecs["taskboard#claim"].checks_sizes and codecs["sideeffect#acquire"].checks_sizes
    assert not codecs["taskboard#seed"].checks_sizes  # a list
    assert not codecs["sideeffect#complete"].checks_sizes  # bytes
    claim = codecs["taskboard#claim"]
    assert _abi.lower_ahead(claim, ("x" * MAX_VALUE, "w", 1)) is not None
    assert _abi.lower_ahead(claim, ("x" * (MAX_VALUE + 1), "w", 1)) is None
    assert _abi.lower_ahead(claim, ("é" * (MAX_VALUE // 2 + 1), "w", 1)) is None  # counted in UTF-8 bytes
    assert _abi.lower_ahead(codecs["taskboard#seed"], ([],)) is None


def test_a_text_over_the_limit_is_refused_before_a_transaction() -> None:
    from gak import Kernel, ManualClock, Refused
    from gak.stores.memory import MemoryBackend, MemorySession

    class Begins(MemoryBackend):
        begins = 0

        def session(self) -> MemorySession:
            backend = self

            class S(MemorySession):
                def begin(self) -> None:
                    backend.begins += 1
                    super().begin()

            return S(self)

    store = Begins()
    kernel = Kernel(store, clock=ManualClock(1_000))
    for args in [("x" * (MAX_VALUE + 1), "w", 1_000), ("t", "é" * MAX_VALUE, 1_000)]:
        with pytest.raises(Refused) as e:
            kernel.taskboard.claim(*args)
        assert e.value.code == "invalid-input" and "longer than" in str(e.value)
    assert store.begins == 0


def test_a_workers_last_result_is_freed_when_it_closes() -> None:
    """A worker's result slot keeps its last result (wasmtime drops it when
    it assigns the next); closing the worker frees it."""
    from gak import Kernel, ManualClock, TaskSeed
    from gak.stores.memory import MemoryBackend

    kernel = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    kernel.taskboard.seed([TaskSeed("a")])
    assert kernel.taskboard.get("a").id == "a"
    worker = kernel._pool.checkout()
    kernel._pool.checkin(worker)
    assert _mem.MEM[worker.arena.slots] == _layout.RESULT  # held
    kernel.close()
    assert _mem.MEM[worker.arena.slots] == 0


def test_a_component_of_another_wit_is_refused_when_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated code reads and writes the WIT's layout: a component
    whose functions have other types (built from another WIT of the same
    version) is refused when it is opened, naming the function, never
    lifted into the wrong fields."""
    path = find_component()
    _engine.Compiled(path)  # the component this package was generated for
    claim = _signatures.SIGNATURES["taskboard#claim"]
    moved = claim.replace("id: string, title: string", "title: string, id: string")
    assert moved != claim
    monkeypatch.setitem(_signatures.SIGNATURES, "taskboard#claim", moved)
    with pytest.raises(OpenError, match=r"taskboard#claim differs .* regenerate"):
        _engine.Compiled(path)
    monkeypatch.setitem(_signatures.SIGNATURES, "taskboard#claim", claim)
    monkeypatch.setitem(_signatures.SIGNATURES, "store#write", "func(changes: list<string>) -> result<_, _>")
    with pytest.raises(OpenError, match="store#write differs"):
        _engine.Compiled(path)


def test_a_call_lowered_ahead_is_lowered_again_after_another_used_the_arena() -> None:
    """A call lowered before its transaction sends its Vals only while no
    other call lowered into the thread's arena since (one made from a
    clock, a binding or a signal handler while it runs): a conflict's
    re-run after such a call sends its own arguments."""
    from gak import Kernel, ManualClock, TaskSeed
    from gak.stores.base import StoreConflict
    from gak.stores.memory import MemoryBackend, MemorySession

    other = Kernel(MemoryBackend(), clock=ManualClock(1_000))
    other.taskboard.seed([TaskSeed("elsewhere")])
    armed: list[bool] = []
    reads: list[Any] = []

    class Once(MemoryBackend):
        def session(self) -> MemorySession:
            class S(MemorySession):
                def read(self, keys: Any, ranges: Any, clock: bool = False) -> Any:
                    reads.append(list(keys))
                    if armed:
                        armed.clear()
                        assert other.taskboard.get("elsewhere").id == "elsewhere"  # lowers ahead here
                        raise StoreConflict("busy")
                    return super().read(keys, ranges, clock)

            return S(self)

    kernel = Kernel(Once(), clock=ManualClock(1_000))
    kernel.taskboard.seed([TaskSeed("mine")])
    reads.clear()
    armed.append(True)
    assert kernel.taskboard.claim("mine", "w", 1_000).id == "mine"  # the re-run sent its own id
    # Its own id, then the count record a claim reads with its first crossing.
    assert [r[:1] for r in reads] == [[("tasks", "mine")]] * 2
    assert all(len(r) == 2 and r[1][0] == "meta" and r[1][1].startswith("count/") for r in reads)


def test_memory_key_order_catches_up_without_range_reads() -> None:
    """Commits without any range read leave a bounded number of keys
    waiting to join the order, and of tombstones in it (a claim-only
    workload would otherwise keep every key it ever added or deleted)."""
    from gak.stores import memory

    backend = memory.MemoryBackend()
    session = backend.session()
    n = 12 * memory._TIDY_EVERY
    for i in range(n):
        session.begin()
        session.write([("indexes", f"q/{i:08d}", "{}"), ("indexes", f"q/{i - 1:08d}", None)])
        session.commit()
    table = backend._tables["indexes"]
    assert len(table.added) <= memory._ADDED_MAX + memory._TIDY_EVERY
    assert table.size <= 2 * len(table.values) + memory._REBUILD_MIN + memory._TIDY_EVERY
    assert len(table.added) <= max(memory._ADDED_MAX, 2 * len(table.values)) + 2 * memory._TIDY_EVERY
    assert table.size > 0  # the order was caught up along the way
    session.begin()
    assert session.scan("indexes", "q/", None, 10) == [(f"q/{n - 1:08d}", "{}")]
    session.rollback()
