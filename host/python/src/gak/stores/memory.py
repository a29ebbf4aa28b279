"""The in-memory binding: one map per table, one writer at a time.

A transaction takes the store-wide lock at ``begin`` — one lock acquisition
per call, held until ``commit`` or ``rollback`` — and keeps its writes in an
overlay until ``commit``, so it is serializable and all-or-nothing. Keys are
kept sorted per table (code point order = UTF-8 byte order) so a range read
reads O(limit) entries; the order is brought up to date by the first range
read of a table after commits added or removed keys (most calls read keys,
never ranges: a claim's commit adds two index keys and removes two, and
keeping the order at every commit was two thirds of its store work).
"""

from __future__ import annotations

import bisect
import threading
from typing import Any, Iterator, Optional, Sequence

from .base import TABLE_SET, TABLES, Answers, Change, Helpers, Key, Range, StoreFailure, checked_table

#: What the overlay answers for a key this transaction did not write (it
#: holds ``None`` for a key it deleted).
_ABSENT = object()


class _SortedKeys:
    """Keys in code point order (= UTF-8 byte order), in chunks of at most
    ``_CHUNK`` so that inserting or removing one costs O(log n + chunk), not
    a shift of the whole list (what ``bisect.insort`` on one list costs)."""

    __slots__ = ("chunks", "maxes")

    def __init__(self) -> None:
        self.chunks: list[list[str]] = []
        self.maxes: list[str] = []

    def add(self, key: str) -> None:
        """Insert ``key`` unless it is there."""
        if not self.chunks:
            self.chunks.append([key])
            self.maxes.append(key)
            return
        i = bisect.bisect_left(self.maxes, key)
        if i == len(self.maxes):
            i -= 1
            self.chunks[i].append(key)
            self.maxes[i] = key
        else:
            chunk = self.chunks[i]
            j = bisect.bisect_left(chunk, key)
            if j < len(chunk) and chunk[j] == key:
                return
            chunk.insert(j, key)
        chunk = self.chunks[i]
        if len(chunk) > 2 * _CHUNK:
            half = chunk[_CHUNK:]
            del chunk[_CHUNK:]
            self.chunks.insert(i + 1, half)
            self.maxes[i] = chunk[-1]
            self.maxes.insert(i + 1, half[-1])

    def remove(self, key: str) -> None:
        """Remove ``key`` if it is there."""
        i = bisect.bisect_left(self.maxes, key)
        if i == len(self.maxes):
            return
        chunk = self.chunks[i]
        j = bisect.bisect_left(chunk, key)
        if j == len(chunk) or chunk[j] != key:
            return
        del chunk[j]
        if not chunk:
            del self.chunks[i]
            del self.maxes[i]
        else:
            self.maxes[i] = chunk[-1]

    def from_(self, lower: str, strict: bool) -> Iterator[str]:
        """Keys >= lower (> lower when ``strict``), in order."""
        pick = bisect.bisect_right if strict else bisect.bisect_left
        i = pick(self.maxes, lower)
        if i == len(self.chunks):
            return
        j = pick(self.chunks[i], lower)
        yield from self.chunks[i][j:]
        for chunk in self.chunks[i + 1 :]:
            yield from chunk


_CHUNK = 512


class _Table:
    """A table's values and its keys in order. The order (:attr:`keys`)
    may lag behind :attr:`values` for the keys in :attr:`dirty` (put new or
    deleted since the order was last caught up); :meth:`ordered` catches it
    up from the values. Every other key is in both or in neither."""

    __slots__ = ("values", "keys", "dirty")

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.keys = _SortedKeys()
        self.dirty: set[str] = set()

    def put(self, key: str, value: str) -> None:
        values = self.values
        if key not in values:
            self.dirty.add(key)
        values[key] = value

    def delete(self, key: str) -> None:
        if self.values.pop(key, _ABSENT) is not _ABSENT:
            self.dirty.add(key)

    def ordered(self) -> _SortedKeys:
        """The keys in order, up to date."""
        if self.dirty:
            values, keys = self.values, self.keys
            for key in sorted(self.dirty):
                if key in values:
                    keys.add(key)
                else:
                    keys.remove(key)
            self.dirty.clear()
        return self.keys


class MemoryBackend:
    """A map shared by every session made from it (one process)."""

    def __init__(self) -> None:
        self._tables = {t: _Table() for t in TABLES}
        self._lock = threading.Lock()

    def session(self) -> "MemorySession":
        return MemorySession(self)

    def describe(self) -> str:
        return "memory"

    def close(self) -> None:
        pass

    def dump(self) -> dict[tuple[str, str], str]:
        """Every entry, for tests comparing store states."""
        with self._lock:
            return {(t, k): v for t, tab in self._tables.items() for k, v in tab.values.items()}


class MemorySession(Helpers):
    """One worker's view; ``begin`` waits for the store-wide lock."""

    def __init__(self, backend: MemoryBackend) -> None:
        self._backend = backend
        self._overlay: Optional[dict[tuple[str, str], Any]] = None
        # Bound once: every call begins, reads and commits through them.
        self._lock = backend._lock
        self._tables = backend._tables

    def _pending(self) -> dict[tuple[str, str], Any]:
        if self._overlay is None:
            raise StoreFailure("no open transaction")
        return self._overlay

    def begin(self) -> None:
        if self._overlay is not None:
            raise StoreFailure("transaction already open")
        self._lock.acquire()
        self._overlay = {}

    def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
        pending = self._overlay
        if pending is None:
            raise StoreFailure("no open transaction")
        tables = self._tables
        values: list[Optional[str]] = []
        for t, k in keys:
            table = tables.get(t)
            if table is None:
                checked_table(t)  # raises
            # The overlay is empty at a call's first read (the component
            # writes once, at the end): skip the lookup then.
            v = pending.get((t, k), _ABSENT) if pending else _ABSENT
            values.append(table.values.get(k) if v is _ABSENT else v)  # type: ignore[union-attr]
        pages = [self._range(pending, t, prefix, after, limit) for t, prefix, after, limit in ranges] if ranges else []
        return values, pages, None

    def write(self, changes: Sequence[Change]) -> None:
        pending = self._overlay
        if pending is None:
            raise StoreFailure("no open transaction")
        for t, k, v in changes:
            if t not in TABLE_SET:
                checked_table(t)
            pending[(t, k)] = v  # None: deleted

    def _range(
        self, pending: dict[tuple[str, str], Any], table: str, prefix: str, after: Optional[str], limit: int
    ) -> list[tuple[str, str]]:
        tab = self._tables[checked_table(table)]
        strict = after is not None and after >= prefix
        lower = after if strict else prefix

        def inside(k: str) -> bool:
            return k.startswith(prefix) and (k > lower if strict else k >= lower)

        # This transaction's writes in range (they win over committed data).
        mine = {k: v for (t, k), v in pending.items() if t == table and inside(k)}
        deleted = sum(1 for v in mine.values() if v is None)
        merged: dict[str, Any] = {}
        want = limit + deleted
        for k in tab.ordered().from_(lower, strict):
            if len(merged) >= want or not k.startswith(prefix):
                break
            merged[k] = tab.values[k]
        merged.update(mine)
        out = [(k, v) for k, v in sorted(merged.items()) if v is not None]
        return out[:limit]

    def commit(self) -> None:
        pending = self._pending()
        tables = self._tables
        # _Table.put and .delete, inline (a claim commits five changes).
        for (t, k), v in pending.items():
            table = tables[t]
            values = table.values
            if v is None:
                if values.pop(k, _ABSENT) is not _ABSENT:
                    table.dirty.add(k)
            else:
                if k not in values:
                    table.dirty.add(k)
                values[k] = v
        self._end()

    def rollback(self) -> None:
        if self._overlay is not None:
            self._end()

    def _end(self) -> None:
        self._overlay = None
        self._lock.release()

    def close(self) -> None:
        self.rollback()

    def lend(self) -> None:
        pass

    def reclaim(self) -> Optional[Exception]:
        return None

    @property
    def raw(self) -> Any:
        return None
