"""The naive wasmtime-py 50 embedding of the same claim (generic
`Func.__call__` and `add_func`, results forced tagged, an in-memory dict as
the store): the "before" figure for `tools/latency.py`.

    python tools/baseline_wasmtime_py.py PATH/TO/gak.wasm
"""
import os
import sys
import time

import wasmtime
from wasmtime import Engine, Store, WasiConfig
from wasmtime.component import Component, Linker, _types
from wasmtime.component._types import Variant
_types.ResultType._tagged = lambda self: True
e = Engine()
c = Component(e, open(sys.argv[1], 'rb').read())
data = {}
pending = {}
class Answers:
    def __init__(s, values, pages, now, entropy):
        s.values, s.pages, s.now, s.entropy = values, pages, now, entropy
def page(table, prefix, after, limit):
    items = sorted((k, v) for (t, k), v in {**data, **pending}.items() if t == table and k.startswith(prefix) and (after is None or k > after) and v is not None)
    return items[:limit]
now = [1000]
def read(store, reads):
    values = [pending.get((t, k), data.get((t, k))) for t, k in reads.keys]
    pages = [page(r.table, r.prefix, r.after, r.limit) for r in reads.ranges]
    return Variant('ok', Answers(values, pages, now[0] if reads.clock else None, os.urandom(reads.entropy)))
def write(store, changes):
    for c in changes:
        pending[(c.table, c.key)] = c.value
    return Variant('ok', None)
l = Linker(e); l.add_wasip2()
with l.root() as r:
    with r.add_instance("gak:kernel/store@0.4.0") as s:
        for n, f in [("read", read), ("write", write)]:
            s.add_func(n, f)
store = Store(e); store.set_wasi(WasiConfig())
inst = l.instantiate(store, c)
tb = c.get_export_index("gak:kernel/taskboard@0.4.0")
seed = inst.get_func(store, c.get_export_index("seed", tb))
claim = inst.get_func(store, c.get_export_index("claim", tb))
class Seed:
    def __init__(s, id):
        s.id = id; s.title = None; s.deps = []; s.state = None
        # wasmtime-py reads a record's fields by their WIT (kebab-case) names.
        for f in ("priority", "not-before", "max-attempts", "group"):
            setattr(s, f, None)
N = 2000
r = seed(store, [Seed('t%d' % i) for i in range(N + 200)])
data.update(pending); pending.clear()
for i in range(200): claim(store, 't%d' % i, 'w', 60000); data.update(pending); pending.clear()
t0 = time.thread_time()
for i in range(200, 200 + N):
    r = claim(store, 't%d' % i, 'w', 60000)
    data.update(pending); pending.clear()
print('naive wasmtime-py claim cpu us', round((time.thread_time() - t0) / N * 1e6, 1), r.tag)
