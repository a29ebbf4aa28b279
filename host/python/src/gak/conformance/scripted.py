"""The scripted store of the host-protocol cases (``tests/host-protocol``):
the memory binding, wrapped to count transactions and inject faults.

Each call step arms the faults it names and resets the counts; the host
then runs the call as it always does, and the case compares how many times
it began, committed and rolled back (every attempt counted) and what it
answered.

Operations are counted as every host counts them (the Rust host's
``conformance/protocol.rs``), so ``nth`` means the same everywhere: one
``read`` — the component's ``store.read`` crossing, however many keys and
ranges it carries, or one ``downstream`` get — is ONE read operation,
touching every table it names; one write set (``store.write``, or one
``downstream`` put) is ONE write operation, touching a table when any of its
changes is on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ..stores.base import Answers, Change, Key, Range, StoreConflict, StoreFailure
from ..stores.memory import MemoryBackend, MemorySession

OPS = ("begin", "read", "write", "commit")
ANSWERS = ("conflict", "failure", "lost")


class BadFault(ValueError):
    """A ``faults`` entry the scripted store cannot play."""


@dataclass
class Fault:
    """``{"on", "answer", "table"?, "nth"?, "times"?}`` of a call step."""

    on: str
    answer: str
    table: Optional[str] = None
    nth: int = 1
    times: Optional[int] = 1  # None: every matching operation from the nth on
    seen: int = 0

    @classmethod
    def parse(cls, raw: Any) -> "Fault":
        if not isinstance(raw, dict):
            raise BadFault(f"a fault is an object, not {raw!r}")
        on, answer = raw.get("on"), raw.get("answer")
        if on not in OPS:
            raise BadFault(f"on: {on!r} is not one of {OPS}")
        if answer not in ANSWERS or (answer == "lost" and on != "commit"):
            raise BadFault(f"answer: {answer!r} (lost only at commit)")
        table = raw.get("table")
        if table is not None and not isinstance(table, str):
            raise BadFault(f"table: {table!r}")
        nth = raw.get("nth", 1)
        if type(nth) is not int or nth < 1:
            raise BadFault(f"nth: {nth!r}")
        times = raw.get("times", 1)
        if times == "all":
            times = None
        elif type(times) is not int or times < 1:
            raise BadFault(f"times: {times!r}")
        return cls(on, answer, table, nth, times)

    def strikes(self, op: str, tables: Sequence[str]) -> bool:
        """Count one operation; whether this fault answers it."""
        if op != self.on or (self.table is not None and self.table not in tables):
            return False
        self.seen += 1
        if self.seen < self.nth:
            return False
        return self.times is None or self.seen < self.nth + self.times


@dataclass
class Script:
    """The faults armed for the current step and the transactions counted."""

    faults: list[Fault] = field(default_factory=list)
    begin: int = 0
    commit: int = 0
    rollback: int = 0

    def arm(self, faults: Sequence[Any]) -> None:
        self.faults = [Fault.parse(f) for f in faults]
        self.begin = self.commit = self.rollback = 0

    def counts(self) -> dict[str, int]:
        return {"begin": self.begin, "commit": self.commit, "rollback": self.rollback}

    def answer(self, op: str, tables: Sequence[str] = ()) -> Optional[str]:
        # Every fault counts every operation it matches, even when an
        # earlier fault answers it.
        hits = [f.answer for f in self.faults if f.strikes(op, tables)]
        return hits[0] if hits else None


def _raise(answer: str, op: str) -> None:
    if answer == "conflict":
        raise StoreConflict(f"scripted conflict at {op}")
    raise StoreFailure(f"scripted failure at {op}")


class ScriptedBackend(MemoryBackend):
    """A memory store whose sessions obey :attr:`script`."""

    def __init__(self) -> None:
        super().__init__()
        self.script = Script()

    def session(self) -> "ScriptedSession":  # type: ignore[override]
        return ScriptedSession(self)

    def describe(self) -> str:
        return "scripted memory"


class ScriptedSession(MemorySession):
    def __init__(self, backend: ScriptedBackend) -> None:
        super().__init__(backend)
        self._script = backend.script

    def begin(self) -> None:
        self._script.begin += 1
        answer = self._script.answer("begin")
        if answer is not None:
            _raise(answer, "begin")  # nothing opened: no rollback follows
        super().begin()

    def read(self, keys: Sequence[Key], ranges: Sequence[Range], clock: bool = False) -> Answers:
        if keys or ranges:
            # A read of no keys and no ranges (only the clock, the
            # entropy) reads nothing from the store: not an operation (the
            # Rust host never hands it to its binding).
            answer = self._script.answer("read", [t for t, _ in keys] + [r[0] for r in ranges])
            if answer is not None:
                _raise(answer, "read")
        return super().read(keys, ranges, clock)

    def write(self, changes: Sequence[Change]) -> None:
        answer = self._script.answer("write", [c[0] for c in changes])
        if answer is not None:
            _raise(answer, "write")
        super().write(changes)

    def commit(self) -> None:
        self._script.commit += 1
        answer = self._script.answer("commit")
        if answer == "lost":
            super().commit()  # applied; only the acknowledgement is lost
            raise StoreFailure("scripted: the commit's acknowledgement was lost")
        if answer is not None:
            # The binding's job: a failed commit leaves no transaction open.
            MemorySession.rollback(self)
            _raise(answer, "commit")
        super().commit()

    def rollback(self) -> None:
        self._script.rollback += 1
        super().rollback()

    def close(self) -> None:
        MemorySession.rollback(self)  # not the host's rollback: not counted
