"""Sizes checked before anything is lowered into the component (HOSTS.md
rule 16).

Lowering costs 32 host bytes per byte of a ``list<u8>`` (one C value per
element) and time in proportion: a 48 MiB result took 13.7 s and ~4 GiB
before the component refused it. No contract value is longer than 1 MiB (ids
256 bytes, reasons 4 KiB, results 1 MiB) and no list longer than 10,000
items, so a call carrying more is refused with ``invalid-input`` here,
before a worker is checked out or a transaction opens. Everything within
these bounds is the component's to judge.

``checkpoint.build-plan`` is the exception: it is pure, and SPEC 8 makes
every step-id problem (an overlong id included) ``invalid-plan``, so for it
only the 64 MiB total is the host's to bound (``each=False``).

The same walk refuses what the host language cannot send (rule 9): an int
outside ``-2**31 … 2**64 - 1`` (no integer of the contract is: ``s32`` and
``u32``/``u64``; each is then checked against its own type by the codecs)
and text that is not Unicode (lone surrogates).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from .stores._facts import MAX_CALL_BYTES, MAX_LIST_ITEMS, MAX_VALUE_BYTES

#: The longest string or byte argument (bytes; strings count UTF-8 bytes),
#: the most items in one list argument, and the most bytes of strings and
#: bytes in one call, all arguments together: the protocol's numbers
#: (``host/sql/store.json``).
MAX_VALUE = MAX_VALUE_BYTES
MAX_ITEMS = MAX_LIST_ITEMS
MAX_TOTAL = MAX_CALL_BYTES

_U64 = 1 << 64
#: The lowest int of the contract (an ``s32``: a task's priority).
_MIN_INT = -(1 << 31)


def oversized(args: Sequence[Any], each: bool = True) -> Optional[str]:
    """Why ``args`` (wire-form arguments: str, bytes, int, bool, None,
    tuples for records, lists) cannot be sent, or ``None``. ``each=False``
    bounds only the total, not each value and list."""
    if _flat_within(args, MAX_VALUE if each else MAX_TOTAL):
        return None
    return _walk(args, each)


def _walk(args: Sequence[Any], each: bool) -> Optional[str]:
    """:func:`oversized` by walking every value."""
    value = MAX_VALUE if each else MAX_TOTAL
    items = MAX_ITEMS if each else 1 << 62
    total = 0
    stack = list(args)
    while stack:
        v = stack.pop()
        t = type(v)
        if t is str:
            n = len(v)
            if n > value:  # at least as many bytes as characters
                return f"a string of {n} characters is longer than {value} bytes"
            if not v.isascii():  # O(1) for CPython's compact strings
                try:
                    n = len(v.encode("utf-8"))
                except UnicodeEncodeError as e:
                    return f"not valid Unicode text: {e.reason}"
                if n > value:
                    return f"a string of {n} UTF-8 bytes is longer than {value} bytes"
            total += n
        elif t is bytes or t is bytearray or t is memoryview:
            n = len(v)
            if n > value:
                return f"a byte string of {n} bytes is longer than {value} bytes"
            total += n
        elif t is int:
            if not _MIN_INT <= v < _U64:
                return f"{v} is out of range for every integer of the contract (s32, u32, u64)"
            continue
        elif t is list:
            if len(v) > items:
                return f"a list of {len(v)} items is longer than {items}"
            stack.extend(v)
            continue
        elif t is tuple:
            stack.extend(v)
            continue
        elif isinstance(v, (str, int)) and t is not bool:
            stack.append(str(v) if isinstance(v, str) else int(v))  # subclasses (enums): as the base
            continue
        else:
            continue  # bool, None: nothing to measure
        if total > MAX_TOTAL:
            return f"the call's strings and bytes exceed {MAX_TOTAL} bytes"
    return None


def _flat_within(args: Sequence[Any], value: int) -> bool:
    """True when ``args`` are few ASCII strings no longer than ``value``,
    ints within u64, ``None`` and bools, bare or in tuples (records) of
    them — nearly every call — so :func:`oversized` need not walk them.
    False means "walk them", not "too large". At most 64 strings of at
    most 1 MiB each cannot exceed the 64 MiB total, so only their count is
    bounded here."""
    if len(args) > 8:
        return False
    strings = 0
    for v in args:
        t = type(v)
        if t is str:
            if len(v) > value or not v.isascii():
                return False
            strings += 1
        elif t is int:
            if not 0 <= v < _U64:
                return False
        elif t is tuple:
            if len(v) > 8:
                return False
            for w in v:
                u = type(w)
                if u is str:
                    if len(w) > value or not w.isascii():
                        return False
                    strings += 1
                elif u is int:
                    if not 0 <= w < _U64:
                        return False
                elif w is not None and u is not bool:
                    return False
        elif v is not None and t is not bool:
            return False
    return strings * value <= MAX_TOTAL
