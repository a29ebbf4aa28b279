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
// transaction on its own connection from the kernel's pool.
//
// Contexts: every method checks its context before the call starts, and a
// call waiting for a free connection stops waiting when its context is done
// (it returns ctx.Err(), unwrapped, as before the call starts: nothing was
// sent). A call that started runs to its end: the kernel's transactions are
// short and never left half done, and libgak takes no deadline.
//
// What is promised about waiting: a call never waits for ever. A call from
// inside a sink body into the same kernel (through the body's context, or
// on the body's goroutine) is refused at once with CodeInvalidInput; a call
// made after Close began fails at once. A wait for a free connection
// lasts at most Options.ConnectionWait or until the context is done,
// whichever comes first, then the call fails with a *StorageError (or
// ctx.Err()). A wait for a lock another call's transaction holds (what a
// goroutine a body started waits for if it calls the kernel while the body
// waits for it) lasts at most Options.ConnectionWait on memory and
// PostgreSQL, SQLite's busy timeout (5 s) on SQLite, whatever the context
// says; one that runs out is a conflict, so the call runs again, at most
// Options.RetryAttempts times in all (10 by default), then fails with a
// *StorageError.
//
// The package checks when it loads that libgak.a is the library gak.h
// describes (GAK_ABI_VERSION and GAK_ABI_LAYOUT against gak_abi_version()
// and gak_abi_layout()); if it is not, Open, OpenWith and
// DropPostgresSchema fail with a *StorageError naming both.
package gak

/*
#include <stdlib.h>
#include "gak.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Kernel is the kernel over one store.
type Kernel struct {
	// mu guards the fields below. It is never held during a call: a call
	// counts itself in inflight instead, so Close, waiting for the calls
	// that run, never stands in the way of a call (a read-write lock did:
	// a waiting writer blocks new readers, and a sink body's call into its
	// own kernel then waited for a Close that waited for the body).
	mu       sync.Mutex
	k        *C.gak_kernel
	inflight int
	closing  bool
	idle     *sync.Cond   // signalled when inflight drops to 0 while closing
	clock    *ManualClock // kept alive with the kernel
	// slots holds a token per connection of the pool: a call takes one
	// before it reaches libgak, waiting (at most wait, and no longer than
	// its context) while every connection is in use, so libgak's pool, of
	// the same size, never makes a call of this package wait.
	slots chan struct{}
	wait  time.Duration
	// closed is closed by Close: it wakes the calls waiting for a slot.
	closed chan struct{}
}

// abiMismatch is why this package refuses the libgak it is linked with:
// "" when libgak is the library the gak.h it was compiled against
// describes. Checked once, when the package loads.
var abiMismatch = checkABI(compiledVersion, compiledLayout, linkedVersion, linkedLayout)

// The ABI of the gak.h this package was compiled against, and of the
// libgak it is linked with.
var (
	compiledVersion = uint32(C.GAK_ABI_VERSION)
	compiledLayout  = uint32(C.GAK_ABI_LAYOUT)
	linkedVersion   = uint32(C.gak_abi_version())
	linkedLayout    = uint32(C.gak_abi_layout())
)

// checkABI is the refusal of a library of ABI (libVersion, libLayout) by a
// package compiled against a header of (version, layout), "" when they
// are the same.
func checkABI(version, layout, libVersion, libLayout uint32) string {
	if version == libVersion && layout == libLayout {
		return ""
	}
	return fmt.Sprintf("libgak.a is ABI %d (layout %08x), but this Go package was compiled against a gak.h of ABI %d (layout %08x): "+
		"one of them is a stale build; build libgak (cargo build -p gak-c) and this package from one checkout "+
		"(go clean -cache rebuilds a package cached against an older gak.h)", libVersion, libLayout, version, layout)
}

// loadable is the error every entry point answers when the package
// refuses the linked libgak.
func loadable() error {
	if abiMismatch == "" {
		return nil
	}
	return &StorageError{Message: abiMismatch}
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
	// ConnectionWait bounds a call's wait (default 5 s) for a free
	// connection (then the call fails with a *StorageError; a context done
	// before ends the wait with ctx.Err()) and, on memory
	// and PostgreSQL, each attempt's wait for a lock another call's
	// transaction holds (then the attempt is a conflict and runs again, up
	// to RetryAttempts; SQLite waits out its busy timeout, 5 s, instead).
	ConnectionWait time.Duration
	// StatementTimeout fails any PostgreSQL statement running longer.
	StatementTimeout time.Duration
	// RetryAttempts, RetryBase and RetryMax shape the re-runs on store
	// conflicts (defaults 10, 1 ms, 500 ms).
	RetryAttempts int
	RetryBase     time.Duration
	RetryMax      time.Duration
}

// Open opens a kernel on a store URL with the system clock and default
// settings: "memory:", "sqlite:PATH", "postgres://…" (the Rust host's
// grammar). Errors: *Refused with CodeInvalidInput for an unknown URL or a
// bad option, *StorageError when the store or the component cannot be
// used; no message shows a password.
func Open(url string) (*Kernel, error) {
	if err := loadable(); err != nil {
		return nil, err
	}
	var k *C.gak_kernel
	if err := check(C.gak_kernel_open(str(url), &k)); err != nil {
		return nil, err
	}
	return adopt(k, nil, 0, 0), nil
}

// ms is d in whole milliseconds for an option (0: the default); a
// positive d below 1 ms is 1 ms, never the default, and a negative one is
// refused.
func ms(name string, d time.Duration) (C.uint64_t, error) {
	switch {
	case d < 0:
		return 0, refused(CodeInvalidInput, name+": a negative duration")
	case d > 0 && d < time.Millisecond:
		return 1, nil
	}
	return C.uint64_t(d / time.Millisecond), nil
}

// u32 is n for an option libgak takes as uint32 (0: the default); out of
// range is refused, never wrapped (2^32 + 1 would have been a pool of 1).
func u32(name string, n int) (C.uint32_t, error) {
	if n < 0 || uint64(n) > math.MaxUint32 {
		return 0, refused(CodeInvalidInput, fmt.Sprintf("%s: %d is out of range (0 to %d)", name, n, uint32(math.MaxUint32)))
	}
	return C.uint32_t(n), nil
}

// OpenWith opens a kernel with settings (errors as Open; an option out of
// its range is CodeInvalidInput).
func OpenWith(o Options) (*Kernel, error) {
	if err := loadable(); err != nil {
		return nil, err
	}
	opts := C.gak_options{store: str(o.Store)}
	var err error
	if opts.max_connections, err = u32("MaxConnections", o.MaxConnections); err != nil {
		return nil, err
	}
	if opts.connection_wait_ms, err = ms("ConnectionWait", o.ConnectionWait); err != nil {
		return nil, err
	}
	if opts.statement_timeout_ms, err = ms("StatementTimeout", o.StatementTimeout); err != nil {
		return nil, err
	}
	if opts.retry_attempts, err = u32("RetryAttempts", o.RetryAttempts); err != nil {
		return nil, err
	}
	if opts.retry_base_ms, err = ms("RetryBase", o.RetryBase); err != nil {
		return nil, err
	}
	if opts.retry_max_ms, err = ms("RetryMax", o.RetryMax); err != nil {
		return nil, err
	}
	if o.Clock != nil {
		opts.clock = o.Clock.c
	}
	var k *C.gak_kernel
	if err := check(C.gak_kernel_open_with(opts, &k)); err != nil {
		return nil, err
	}
	runtime.KeepAlive(o.Clock)
	return adopt(k, o.Clock, int(opts.max_connections), time.Duration(opts.connection_wait_ms)*time.Millisecond), nil
}

// adopt wraps a kernel libgak opened with a pool of size connections
// (0: the default) and a connection wait (0: the default).
func adopt(k *C.gak_kernel, clock *ManualClock, size int, wait time.Duration) *Kernel {
	if size == 0 {
		size = maxConnections
	}
	if wait == 0 {
		wait = connectionWaitMs * time.Millisecond
	}
	kernel := &Kernel{k: k, clock: clock, slots: make(chan struct{}, size), wait: wait, closed: make(chan struct{})}
	kernel.idle = sync.NewCond(&kernel.mu)
	// A kernel dropped without Close still closes its connections.
	runtime.SetFinalizer(kernel, (*Kernel).Close)
	return kernel
}

// Close closes the kernel's connections. From the moment it is called,
// new calls fail at once with a *StorageError ("the kernel is closed"),
// including calls the running calls' sink bodies make; Close returns once
// every running call returned. Closing twice is harmless. Never call it
// from inside a sink body (it would wait for the body's own call).
func (k *Kernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.closing {
		close(k.closed)
	}
	k.closing = true
	for k.inflight > 0 {
		k.idle.Wait()
	}
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
// transaction it runs in), the call takes a connection's slot (waiting
// while every connection is in use: at most the connection wait, no
// longer than ctx), a call after Close began fails, and the kernel is held
// open until leave.
func (k *Kernel) enter(ctx context.Context) (*C.gak_kernel, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if in, ok := ctx.Value(insideKey{}).(*inside); ok && in.holds(k) {
		return nil, refused(CodeInvalidInput, "a kernel call cannot be made from inside another call on the same kernel (a fenced sink's body runs inside its call's transaction)")
	}
	if err := k.take(ctx); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing || k.k == nil {
		<-k.slots
		return nil, &StorageError{Message: "the kernel is closed"}
	}
	k.inflight++
	return k.k, nil
}

// waiting, when set (by tests), is called when a call starts waiting for
// a slot.
var waiting atomic.Pointer[func()]

// take takes a connection's slot: at once when one is free, else when one
// frees, unless ctx is done first (ctx.Err()), the connection wait runs
// out (a *StorageError, as libgak's pool says it) or the kernel closes.
func (k *Kernel) take(ctx context.Context) error {
	select {
	case k.slots <- struct{}{}:
		return nil
	default:
	}
	if hook := waiting.Load(); hook != nil {
		(*hook)()
	}
	timer := time.NewTimer(k.wait)
	defer timer.Stop()
	select {
	case k.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return &StorageError{Message: fmt.Sprintf("no connection became free within %d ms (all %d are in use; raise Options.MaxConnections or Options.ConnectionWait)", k.wait.Milliseconds(), cap(k.slots))}
	case <-k.closed:
		return &StorageError{Message: "the kernel is closed"}
	}
}

func (k *Kernel) leave() {
	k.mu.Lock()
	k.inflight--
	if k.inflight == 0 && k.closing {
		k.idle.Broadcast()
	}
	k.mu.Unlock()
	<-k.slots
}

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
	if d > 0 {
		C.gak_clock_advance(c.c, C.uint64_t(d/time.Millisecond))
	}
}

// AdvanceMs moves the clock forward by ms.
func (c *ManualClock) AdvanceMs(ms uint64) {
	defer runtime.KeepAlive(c)
	C.gak_clock_advance(c.c, C.uint64_t(ms))
}

// DropPostgresSchema drops the schema a "postgres://…?schema=NAME" URL
// names, with everything in it (for tests that make a schema per case).
func DropPostgresSchema(url string) error {
	if err := loadable(); err != nil {
		return err
	}
	return check(C.gak_postgres_drop_schema(str(url)))
}

// Version is libgak's version.
func Version() string { return C.GoString(C.gak_version()) }

// Component is a copy of the component libgak embeds (every kernel runs
// it): libgak's own bytes are read-only memory, which a caller writing to
// the slice would fault on.
func Component() []byte {
	var b C.gak_bytes
	C.gak_component(&b)
	return C.GoBytes(unsafe.Pointer(b.ptr), C.int(b.len))
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
