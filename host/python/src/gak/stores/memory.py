"""The in-memory binding: one map per table, one writer at a time.

A transaction takes the store-wide lock at ``begin`` — one lock acquisition
per call, held until ``commit`` or ``rollback`` — and keeps its writes in an
overlay until ``commit``, so it is serializable and all-or-nothing. Keys are
kept sorted per table (code point order = UTF-8 byte order) so a range read
reads O(limit) entries. The order is kept lazily (most calls read keys,
never ranges; a claim's commit adds two index keys and removes two, and
keeping the order at every commit was two thirds of its store work): a
deleted key stays in it until it is compacted (range reads skip keys that
are gone), and new keys join it at the first range read of the table, or
once there are many of them.
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

    @classmethod
    def of_sorted(cls, keys: list[str]) -> "_SortedKeys":
        """The order of ``keys`` (sorted, distinct)."""
        order = cls()
        order.chunks = [keys[i : i + _CHUNK] for i in range(0, len(keys), _CHUNK)]
        order.maxes = [c[-1] for c in order.chunks]
        return order

    def add(self, key: str) -> bool:
        """Insert ``key`` unless it is there; whether it was inserted."""
        if not self.chunks:
            self.chunks.append([key])
            self.maxes.append(key)
            return True
        i = bisect.bisect_left(self.maxes, key)
        if i == len(self.maxes):
            i -= 1
            self.chunks[i].append(key)
            self.maxes[i] = key
        else:
            chunk = self.chunks[i]
            j = bisect.bisect_left(chunk, key)
            if j < len(chunk) and chunk[j] == key:
                return False
            chunk.insert(j, key)
        chunk = self.chunks[i]
        if len(chunk) > 2 * _CHUNK:
            half = chunk[_CHUNK:]
            del chunk[_CHUNK:]
            self.chunks.insert(i + 1, half)
            self.maxes[i] = chunk[-1]
            self.maxes.insert(i + 1, half[-1])
        return True

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

#: Every this many commits (a power of two) a session tidies the tables
#: (_Table.tidy): new keys join the order once there are more than
#: _ADDED_MAX of them and twice as many as the table has keys (a catch-up
#: costs about the table's size, ~0.3 µs a key: rarer is cheaper, and
#: memory stays proportional to the table).
_TIDY_EVERY = 256
_ADDED_MAX = 1024
#: Below this many keys a catch-up inserts one by one, and tombstones are
#: compacted only past this many over the live keys.
_REBUILD_MIN = 1024


class _Table:
    """A table's values and its keys in order. The order (:attr:`keys`)
    holds every key of :attr:`values` except those in :attr:`added` (put
    new since it was caught up), and may hold keys that are gone
    (tombstones: deleting costs the order nothing). :meth:`ordered` adds
    the new keys, and compacts the order when tombstones are as many as
    the live keys; :meth:`tidy` does so when new keys pile up, so neither
    grows without bound in a workload that never reads a range."""

    __slots__ = ("values", "keys", "added", "size")

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.keys = _SortedKeys()
        self.added: set[str] = set()
        #: Keys in the order, tombstones included.
        self.size = 0

    def put(self, key: str, value: str) -> None:
        values = self.values
        if key not in values:
            self.added.add(key)
        values[key] = value

    def delete(self, key: str) -> None:
        self.values.pop(key, None)

    def ordered(self) -> _SortedKeys:
        """The keys in order, every live key in it (tombstones may remain)."""
        added = self.added
        if added:
            values = self.values
            live = [k for k in added if k in values]
            added.clear()
            if len(live) * 16 > self.size + _REBUILD_MIN:
                self._rebuild(live)
            else:
                add = self.keys.add
                for key in sorted(live):
                    self.size += add(key)
        if self.size > 2 * len(self.values) + _REBUILD_MIN:
            self._rebuild([])
        return self.keys

    def _rebuild(self, new: list[str]) -> None:
        # The live keys of the order are in order already and the new ones
        # sorted: one sort of two runs (timsort merges them), then chunked.
        values = self.values
        keep = [k for chunk in self.keys.chunks for k in chunk if k in values]
        have = set(keep) if new else ()
        new.sort()
        keep += [k for k in new if k not in have]
        keep.sort()
        self.keys = _SortedKeys.of_sorted(keep)
        self.size = len(keep)

    def tidy(self) -> None:
        """Catch the order up if new keys or tombstones have piled up."""
        if len(self.added) > max(_ADDED_MAX, 2 * len(self.values)) or self.size > 2 * len(self.values) + _REBUILD_MIN:
            self.ordered()


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
        self._commits = 0

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
        values = tab.values
        for k in tab.ordered().from_(lower, strict):
            if len(merged) >= want or not k.startswith(prefix):
                break
            v = values.get(k)
            if v is not None:  # else a tombstone: deleted since
                merged[k] = v
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
                values.pop(k, None)  # a tombstone in the order, if it was there
            else:
                if k not in values:
                    table.added.add(k)
                values[k] = v
        self._commits += 1
        if not self._commits & (_TIDY_EVERY - 1):
            for table in tables.values():
                table.tidy()
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
