package gak

/*
#include "gak.h"
extern int32_t gakGoSinkBody(void *user, gak_downstream *down);
*/
import "C"

import (
	"context"
	"database/sql"
	"fmt"
	"runtime/cgo"
	"strconv"
	"sync"
	"unsafe"
)

// SinkBody runs inside a call's transaction (a fenced write's, or
// WithDownstream's): what it writes through down commits or rolls back
// with the call. Returning an error rolls everything back (the call is
// CodeWriteFailed, the error its Err). It may run more than once when the
// store reports a conflict, so it must be re-runnable; the call answers
// what its last run did (an earlier run's error or panic is forgotten
// with the conflict that re-ran it).
//
// It must not call the same kernel: a call through ctx (which carries the
// mark) or on the body's goroutine is refused at once with
// CodeInvalidInput; a goroutine the body starts that calls the kernel
// with another context cannot be told from any other caller, and waits
// for the locks the body's transaction holds — each attempt at most
// Options.ConnectionWait on memory and PostgreSQL, SQLite's busy timeout
// on SQLite, RetryAttempts attempts — then fails with a *StorageError (so
// a body that waits for such a goroutine is slow, never stuck). Nor may it use down after returning, or
// call runtime.Goexit (t.FailNow): it runs on a C stack frame.
type SinkBody func(ctx context.Context, down *Downstream) error

// Downstream is a sink body's access to the call's transaction: the
// binding's downstream table (Get, Put) and, on SQLite and PostgreSQL, its
// own connection (Exec, Query). Safe for use from several goroutines
// while the body runs; dead after it returns.
type Downstream struct {
	mu   sync.Mutex
	c    *C.gak_downstream
	live bool
}

type sinkCall struct {
	ctx      context.Context
	body     SinkBody
	err      error
	panicked bool
	panicVal interface{}
}

func (c *sinkCall) run(down *C.gak_downstream) (rc C.int32_t) {
	d := &Downstream{c: down, live: true}
	// Each run answers for itself: the call reports the last one.
	c.err, c.panicked, c.panicVal = nil, false, nil
	defer func() {
		d.mu.Lock()
		d.live = false
		d.mu.Unlock()
		if p := recover(); p != nil {
			// A panic must not unwind through libgak's frames: the call
			// fails (rolled back) and the panic goes on after it returns.
			c.panicked, c.panicVal = true, p
			c.err = fmt.Errorf("the sink body panicked: %v", p)
			rc = 1
		}
	}()
	if err := c.body(c.ctx, d); err != nil {
		c.err = err
		return 1
	}
	return 0
}

// runBody runs one call whose body is a SinkBody, and finishes it with
// what the last run of the body did: its error behind a write-failed
// refusal, its panic re-raised. A run whose store met a conflict ran
// again, and a call that ends with a store error (every run met a
// conflict, or a store failure) is a *StorageError whatever the body did.
func (k *Kernel) runBody(ctx context.Context, body SinkBody, call func(cb C.gak_sink_body, user unsafe.Pointer) *C.gak_error) error {
	state := &sinkCall{ctx: within(ctx, k), body: body}
	h := cgo.NewHandle(state)
	defer h.Delete()
	handle := uintptr(h)
	err := check(call(C.gak_sink_body(C.gakGoSinkBody), unsafe.Pointer(&handle)))
	if r, ok := err.(*Refused); ok && r.Code == CodeWriteFailed {
		if state.panicked {
			panic(state.panicVal)
		}
		if state.err != nil {
			r.Err = state.err
		}
	}
	if e, ok := err.(*StorageError); ok && state.panicked {
		// The store error is the answer (rule 12); the panic is not lost.
		e.Message += fmt.Sprintf(" (and the sink body's last run panicked: %v)", state.panicVal)
	}
	return err
}

// WriteFenced is a fenced downstream write: presented is compared with
// the highest fence the sink resource has seen (CodeFenceStale below it,
// nothing written), then body runs in the same transaction and presented
// is recorded. A body error is CodeWriteFailed and nothing it wrote stays;
// a store failure the body met ends the call with a *StorageError even if
// the body returned nil.
func (s Sideeffect) WriteFenced(ctx context.Context, resource string, presented uint64, body SinkBody) error {
	k, err := s.k.enter(ctx)
	if err != nil {
		return err
	}
	defer s.k.leave()
	return s.k.runBody(ctx, body, func(cb C.gak_sink_body, user unsafe.Pointer) *C.gak_error {
		return C.gak_sideeffect_write_fenced(k, str(resource), C.uint64_t(presented), cb, user)
	})
}

// WithDownstream runs body in a transaction of its own, without the
// component: to read (or seed) a sink's downstream data.
func (k *Kernel) WithDownstream(ctx context.Context, body SinkBody) error {
	c, err := k.enter(ctx)
	if err != nil {
		return err
	}
	defer k.leave()
	return k.runBody(ctx, body, func(cb C.gak_sink_body, user unsafe.Pointer) *C.gak_error {
		return C.gak_kernel_with_downstream(c, cb, user)
	})
}

func (d *Downstream) use() (*C.gak_downstream, error) {
	d.mu.Lock()
	if !d.live {
		d.mu.Unlock()
		return nil, refused(CodeInvalidInput, "the downstream handle was used after its body returned")
	}
	return d.c, nil
}

// Get reads key of the downstream table; ok is false when it is absent.
func (d *Downstream) Get(key string) (value string, ok bool, err error) {
	c, err := d.use()
	if err != nil {
		return "", false, err
	}
	defer d.mu.Unlock()
	var out C.gak_str
	if err := check(C.gak_downstream_get(c, str(key), &out)); err != nil {
		return "", false, err
	}
	defer C.gak_str_clear(&out)
	return goStr(out), out.ptr != nil, nil
}

// Put writes key = value in the downstream table.
func (d *Downstream) Put(key, value string) error {
	c, err := d.use()
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	return check(C.gak_downstream_put(c, str(key), present(value)))
}

// params copies SQL parameters into C memory: every one is sent as text
// (nil as NULL; numbers in decimal; bool as true / false): cast in SQL on
// PostgreSQL ($1::text::int).
func (a *arena) params(params []any) (*C.gak_str, C.size_t, error) {
	texts := make([]C.gak_str, len(params))
	for i, p := range params {
		var text string
		switch v := p.(type) {
		case nil:
			continue
		case string:
			text = v
		case []byte:
			text = string(v)
		case int:
			text = strconv.Itoa(v)
		case int64:
			text = strconv.FormatInt(v, 10)
		case uint64:
			text = strconv.FormatUint(v, 10)
		case float64:
			text = strconv.FormatFloat(v, 'g', -1, 64)
		case bool:
			text = strconv.FormatBool(v)
		case fmt.Stringer:
			text = v.String()
		default:
			return nil, 0, refused(CodeInvalidInput, fmt.Sprintf("SQL parameter %d: unsupported type %T", i+1, p))
		}
		texts[i] = a.present(text)
	}
	if len(texts) == 0 {
		return nil, 0, nil
	}
	ptr := (*C.gak_str)(a.alloc(len(texts) * int(unsafe.Sizeof(C.gak_str{}))))
	copy(unsafe.Slice(ptr, len(texts)), texts)
	return ptr, C.size_t(len(texts)), nil
}

// Exec runs one statement on the binding's own connection, inside the
// call's transaction (SQLite or PostgreSQL; CodeInvalidInput on memory),
// and returns the rows it changed. Parameters bind in order (?1 / $1 …).
// Transaction control (COMMIT, ROLLBACK, SAVEPOINT, …) is refused with
// CodeInvalidInput; any statement error also ends the call with a
// *StorageError, even if the body returns nil (write "insert if absent"
// as ON CONFLICT DO NOTHING).
func (d *Downstream) Exec(query string, params ...any) (int64, error) {
	c, err := d.use()
	if err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	var a arena
	defer a.free()
	p, n, err := a.params(params)
	if err != nil {
		return 0, err
	}
	var changed C.uint64_t
	if err := check(C.gak_downstream_execute(c, str(query), p, n, &changed)); err != nil {
		return 0, err
	}
	return int64(changed), nil
}

// Query runs one query as Exec does and returns its rows as text (NULL
// as an invalid NullString). On PostgreSQL every column must be text
// (SELECT n::text …).
func (d *Downstream) Query(query string, params ...any) ([][]sql.NullString, error) {
	c, err := d.use()
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	var a arena
	defer a.free()
	p, n, err := a.params(params)
	if err != nil {
		return nil, err
	}
	var out C.gak_rows
	if err := check(C.gak_downstream_query(c, str(query), p, n, &out)); err != nil {
		return nil, err
	}
	defer C.gak_rows_clear(&out)
	rows := make([][]sql.NullString, int(out.rows))
	if out.rows == 0 || out.columns == 0 {
		for i := range rows {
			rows[i] = []sql.NullString{}
		}
		return rows, nil
	}
	cells := unsafe.Slice(out.cells, int(out.rows*out.columns))
	for r := range rows {
		row := make([]sql.NullString, int(out.columns))
		for c := range row {
			cell := cells[r*int(out.columns)+c]
			row[c] = sql.NullString{String: goStr(cell), Valid: cell.ptr != nil}
		}
		rows[r] = row
	}
	return rows, nil
}
