// Package gak embeds the gak coordination kernel: crash-safe runs that
// resume instead of being redone, side effects applied at most once per
// idempotency key, and `uncertain` instead of a guess.
//
// Every rule lives in one WebAssembly component, hosted by the Rust host
// and reached through libgak's C ABI (host/c): this package adds no rule of
// its own, only Go types, errors and a Runner.
//
//	kernel, err := gak.Open("sqlite:gak.db") // or "memory:", "postgres://…"
//	if err != nil { … }
//	defer kernel.Close()
//	task, err := kernel.Taskboard().Claim(ctx, "onboard-user-42", "worker-1", 30*time.Second)
//
// A Kernel is safe for concurrent use by many goroutines; each call is one
// transaction on its own connection from the kernel's pool. Every method
// checks its context before the call starts (a call that started runs to
// its end: the kernel's transactions are short and never left half done).
package gak

/*
#include <stdlib.h>
#include "gak.h"
*/
import "C"

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// Kernel is the kernel over one store.
type Kernel struct {
	mu    sync.RWMutex // calls hold it shared; Close exclusively
	k     *C.gak_kernel
	clock *ManualClock // kept alive with the kernel
}

// Options are every setting of a kernel beyond its store; zero values
// mean the defaults.
type Options struct {
	// Store is the URL: "memory:", "sqlite:PATH[?synchronous=normal]",
	// "postgres://USER[:PASSWORD]@HOST:PORT/DB[?schema=NAME&clock=db&sslmode=…]".
	Store string
	// Clock judges expiry (default: the system clock).
	Clock *ManualClock
	// MaxConnections bounds the pool (default 16).
	MaxConnections int
	// ConnectionWait is how long a call waits for a free connection
	// (default 30 s).
	ConnectionWait time.Duration
	// StatementTimeout fails any PostgreSQL statement running longer.
	StatementTimeout time.Duration
	// RetryAttempts, RetryBase and RetryMax shape the re-runs on store
	// conflicts (defaults 10, 1 ms, 500 ms).
	RetryAttempts int
	RetryBase     time.Duration
	RetryMax      time.Duration
}

// Open opens a kernel on a store URL with the system clock: "memory:",
// "sqlite:PATH", "postgres://…" (the Rust host's grammar). Errors:
// *Refused with CodeInvalidInput for an unknown URL or a bad option,
// *StorageError when the store or the component cannot be used; no
// message shows a password.
func Open(url string) (*Kernel, error) {
	return OpenWith(Options{Store: url})
}

func ms(d time.Duration) C.uint64_t {
	if d <= 0 {
		return 0
	}
	return C.uint64_t(d / time.Millisecond)
}

// OpenWith opens a kernel with settings.
func OpenWith(o Options) (*Kernel, error) {
	opts := C.gak_options{
		store:                str(o.Store),
		max_connections:      C.uint32_t(max0(o.MaxConnections)),
		connection_wait_ms:   ms(o.ConnectionWait),
		statement_timeout_ms: ms(o.StatementTimeout),
		retry_attempts:       C.uint32_t(max0(o.RetryAttempts)),
		retry_base_ms:        ms(o.RetryBase),
		retry_max_ms:         ms(o.RetryMax),
	}
	if o.Clock != nil {
		opts.clock = o.Clock.c
	}
	var k *C.gak_kernel
	if err := check(C.gak_kernel_open_with(opts, &k)); err != nil {
		return nil, err
	}
	runtime.KeepAlive(o.Clock)
	kernel := &Kernel{k: k, clock: o.Clock}
	// A kernel dropped without Close still closes its connections.
	runtime.SetFinalizer(kernel, (*Kernel).Close)
	return kernel, nil
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

// Close closes the kernel's connections, after every running call
// returned; calls afterwards fail with a *StorageError. Closing twice is
// harmless. Never call it from inside a sink body.
func (k *Kernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.k != nil {
		C.gak_kernel_free(k.k)
		k.k = nil
		runtime.SetFinalizer(k, nil)
	}
	return nil
}

// insideKey marks a sink body's context with the kernel whose call it
// runs in.
type insideKey struct{}

type inside struct {
	k     *Kernel
	outer *inside
}

func (in *inside) holds(k *Kernel) bool {
	for ; in != nil; in = in.outer {
		if in.k == k {
			return true
		}
	}
	return false
}

func within(ctx context.Context, k *Kernel) context.Context {
	outer, _ := ctx.Value(insideKey{}).(*inside)
	return context.WithValue(ctx, insideKey{}, &inside{k: k, outer: outer})
}

// enter starts a call: the context is checked, a call from inside one of
// this kernel's sink bodies is refused (it would wait for the
// transaction it runs in), and the kernel is held open until leave.
func (k *Kernel) enter(ctx context.Context) (*C.gak_kernel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if in, ok := ctx.Value(insideKey{}).(*inside); ok && in.holds(k) {
		return nil, refused(CodeInvalidInput, "a kernel call cannot be made from inside another call on the same kernel (a fenced sink's body runs inside its call's transaction)")
	}
	k.mu.RLock()
	if k.k == nil {
		k.mu.RUnlock()
		return nil, &StorageError{Message: "the kernel is closed"}
	}
	return k.k, nil
}

func (k *Kernel) leave() { k.mu.RUnlock() }

// Checkpoint is the kernel's snapshots and resume plans.
func (k *Kernel) Checkpoint() Checkpoint { return Checkpoint{k} }

// Commitgate is the kernel's terminal outcomes.
func (k *Kernel) Commitgate() Commitgate { return Commitgate{k} }

// Sideeffect is the kernel's idempotency gate and fenced sinks.
func (k *Kernel) Sideeffect() Sideeffect { return Sideeffect{k} }

// Taskboard is the kernel's board of tasks.
func (k *Kernel) Taskboard() Taskboard { return Taskboard{k} }

// Retention is the kernel's bounded pruning.
func (k *Kernel) Retention() Retention { return Retention{k} }

// ManualClock is a clock that moves only when told to, for tests and
// conformance: pass it in Options.Clock.
type ManualClock struct {
	c *C.gak_clock
}

// NewManualClock is a clock at now ms.
func NewManualClock(now uint64) *ManualClock {
	c := &ManualClock{c: C.gak_clock_manual(C.uint64_t(now))}
	runtime.SetFinalizer(c, func(c *ManualClock) { C.gak_clock_free(c.c) })
	return c
}

// Now is the clock's time, ms.
func (c *ManualClock) Now() uint64 {
	defer runtime.KeepAlive(c)
	return uint64(C.gak_clock_now(c.c))
}

// Set moves the clock to ms; backwards is refused (CodeInvalidInput).
func (c *ManualClock) Set(ms uint64) error {
	defer runtime.KeepAlive(c)
	return check(C.gak_clock_set(c.c, C.uint64_t(ms)))
}

// Advance moves the clock forward by d (whole ms).
func (c *ManualClock) Advance(d time.Duration) {
	defer runtime.KeepAlive(c)
	C.gak_clock_advance(c.c, ms(d))
}

// AdvanceMs moves the clock forward by ms.
func (c *ManualClock) AdvanceMs(ms uint64) {
	defer runtime.KeepAlive(c)
	C.gak_clock_advance(c.c, C.uint64_t(ms))
}

// DropPostgresSchema drops the schema a "postgres://…?schema=NAME" URL
// names, with everything in it (for tests that make a schema per case).
func DropPostgresSchema(url string) error {
	return check(C.gak_postgres_drop_schema(str(url)))
}

// Version is libgak's version.
func Version() string { return C.GoString(C.gak_version()) }

// Component is the component libgak embeds (every kernel runs it).
func Component() []byte {
	var b C.gak_bytes
	C.gak_component(&b)
	return unsafe.Slice((*byte)(unsafe.Pointer(b.ptr)), int(b.len))
}

// ttl converts a duration to whole ms; below 0 or beyond the kernel's
// range it is refused here (the kernel judges 0 and anything within).
func ttlMs(d time.Duration) (C.uint64_t, error) {
	if d < 0 {
		return 0, refused(CodeInvalidInput, "ttl: a negative duration")
	}
	return C.uint64_t(d / time.Millisecond), nil
}

func quote(s string) string { return strconv.Quote(s) }
