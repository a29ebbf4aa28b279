"""The API's calls of its own, beyond one WIT function each (host-level
calls): a fenced sink's write, whose body runs in the transaction of the
fence compare (``sideeffect.sink-advance``), and pruning's dry run. They
extend the generated interface classes of :mod:`gak.interfaces`, as
``kernel.js`` does in the JavaScript host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from . import interfaces
from .errors import Refused
from .types import Pruned

if TYPE_CHECKING:
    from .kernel import Downstream


class Sideeffect(interfaces.Sideeffect):
    __doc__ = interfaces.Sideeffect.__doc__
    __slots__ = ()

    def write_fenced(self, resource: str, presented: int, body: Callable[["Downstream"], None]) -> None:
        """A fenced downstream write: ``body`` runs in the same transaction as
        the fence compare. ``presented`` below the highest fence the sink has
        seen is ``fence-stale`` and ``body`` does not run. A body that raises
        rolls everything back (seen fence included) and surfaces as
        ``Refused("write-failed")`` whose ``__cause__`` is the body's
        exception. ``body`` may run more than once if the store reports a
        conflict; only the last run's writes can commit.

        A store error the body meets (through ``down`` or ``down.raw``) ends
        the call with :class:`~gak.StorageError` even if the body caught it,
        and the body cannot end the transaction (HOSTS.md rule 12); nor may
        it call this kernel (``invalid-input``, rule 13)."""
        kernel = self._kernel
        kernel._admit((resource, presented))
        failure: list[BaseException] = []

        def run(worker: Any) -> Any:
            failure.clear()
            ok, err = worker.call("sideeffect#sink-advance", resource, presented)
            if not ok:
                return (False, err)
            try:
                kernel._run_body(worker, body)
            except Exception as e:  # noqa: BLE001 - reported as write-failed
                failure.append(e)
                return (False, ("write-failed", None))
            return (True, None)

        try:
            kernel._transact(run)
        except Refused as e:
            if e.code == "write-failed" and failure:
                raise Refused("write-failed", str(failure[0])) from failure[0]
            raise


class Retention(interfaces.Retention):
    __doc__ = interfaces.Retention.__doc__
    __slots__ = ()

    def prune_dry_run(self, before: int, limit: int) -> Pruned:
        """What :meth:`prune` would remove now, without removing it."""
        self._kernel._admit((before, limit))
        pruned: Pruned = self._kernel._transact(lambda w: w.call("retention#prune", before, limit), commit=False)
        return pruned
