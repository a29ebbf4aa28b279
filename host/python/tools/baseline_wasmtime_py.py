"""The naive wasmtime-py 50 embedding of the same claim (generic
`Func.__call__` and `add_func`, results forced tagged, an in-memory dict as
the store): the "before" figure for `tools/latency.py`.

    python tools/baseline_wasmtime_py.py PATH/TO/gak.wasm
"""
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
def get(store, table, key):
    v = pending.get((table, key), data.get((table, key)))
    return Variant('ok', v)
def get_many(store, keys):
    return Variant('ok', [pending.get((t, k), data.get((t, k))) for t, k in keys])
def put(store, table, key, value):
    pending[(table, key)] = value; return Variant('ok', None)
def delete(store, table, key):
    pending[(table, key)] = None; return Variant('ok', None)
def scan(store, table, prefix, after, limit):
    items = sorted((k, v) for (t, k), v in {**data, **pending}.items() if t == table and k.startswith(prefix) and (after is None or k > after) and v is not None)
    return Variant('ok', items[:limit])
now = [1000]
l = Linker(e); l.add_wasip2()
with l.root() as r:
    with r.add_instance("gak:kernel/store@0.2.0") as s:
        for n, f in [("get", get), ("get-many", get_many), ("put", put), ("delete", delete), ("scan", scan)]:
            s.add_func(n, f)
    with r.add_instance("gak:kernel/clock@0.2.0") as ck:
        ck.add_func("now", lambda store: now[0])
store = Store(e); store.set_wasi(WasiConfig())
inst = l.instantiate(store, c)
tb = c.get_export_index("gak:kernel/taskboard@0.2.0")
seed = inst.get_func(store, c.get_export_index("seed", tb))
claim = inst.get_func(store, c.get_export_index("claim", tb))
class Seed:
    def __init__(s, id): s.id = id; s.title = None; s.deps = []; s.state = None
N = 2000
r = seed(store, [Seed('t%d' % i) for i in range(N + 200)])
data.update(pending); pending.clear()
for i in range(200): claim(store, 't%d' % i, 'w', 60000); data.update(pending); pending.clear()
t0 = time.thread_time()
for i in range(200, 200 + N):
    r = claim(store, 't%d' % i, 'w', 60000)
    data.update(pending); pending.clear()
print('naive wasmtime-py claim cpu us', round((time.thread_time() - t0) / N * 1e6, 1), r.tag)
