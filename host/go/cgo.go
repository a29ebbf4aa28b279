package gak

/*
#cgo CFLAGS: -I${SRCDIR}/../c/include
#cgo LDFLAGS: -l:libgak.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
#include <stdlib.h>
#include "gak.h"
*/
import "C"

import (
	"sort"
	"sync/atomic"
	"unsafe"
)

// What crosses the boundary, and how it stays inside cgo's rules
// (https://pkg.go.dev/cmd/cgo#hdr-Passing_pointers):
//
//   - A string or byte argument is a gak_str / gak_bytes passed BY VALUE
//     (or inside a record passed by value) pointing at the Go string's own
//     bytes: Go memory that holds no Go pointers, used by libgak only during
//     the call. No copy.
//   - A record passed by pointer, or a list (seeds, steps, a snapshot's
//     done and fields, SQL parameters), is built in C memory by an arena
//     that copies the strings too (C memory may not hold Go pointers), and
//     freed after the call.
//   - An answer is a C struct libgak fills; its strings are copied into Go
//     values and the struct is handed back to its _clear function.
//
// How each of the contract's types crosses (goTask, cAction, a.snapshot, …)
// is generated from the WIT into abi_gen.go; the primitives are here.

// emptyByte gives a present-but-empty optional string a non-NULL pointer
// (a NULL pointer means "none").
var emptyByte byte

// str borrows s for one call ("" is NULL: none, for an optional string).
func str(s string) C.gak_str {
	if len(s) == 0 {
		return C.gak_str{}
	}
	return C.gak_str{ptr: (*C.char)(*(*unsafe.Pointer)(unsafe.Pointer(&s))), len: C.size_t(len(s))}
}

// present borrows s for one call as a present value, even when empty.
func present(s string) C.gak_str {
	if len(s) == 0 {
		return C.gak_str{ptr: (*C.char)(unsafe.Pointer(&emptyByte)), len: 0}
	}
	return str(s)
}

// bytes borrows b for one call.
func bytes(b []byte) C.gak_bytes {
	if len(b) == 0 {
		return C.gak_bytes{}
	}
	return C.gak_bytes{ptr: (*C.uint8_t)(unsafe.Pointer(&b[0])), len: C.size_t(len(b))}
}

// optBytes borrows b for one call; nil is none, an empty slice is present.
func optBytes(b []byte) C.gak_bytes {
	if b == nil {
		return C.gak_bytes{}
	}
	if len(b) == 0 {
		return C.gak_bytes{ptr: (*C.uint8_t)(unsafe.Pointer(&emptyByte)), len: 0}
	}
	return bytes(b)
}

// goStr copies a string libgak filled ("" when absent).
func goStr(s C.gak_str) string {
	if s.ptr == nil || s.len == 0 {
		return ""
	}
	return string(unsafe.Slice((*byte)(unsafe.Pointer(s.ptr)), int(s.len)))
}

// goBytes copies bytes libgak filled (an empty, non-nil slice when
// present and empty).
func goBytes(b C.gak_bytes) []byte {
	if b.ptr == nil {
		return nil
	}
	out := make([]byte, int(b.len))
	copy(out, unsafe.Slice((*byte)(unsafe.Pointer(b.ptr)), int(b.len)))
	return out
}

// goStrs copies a list of strings libgak filled.
func goStrs(p *C.gak_str, n C.size_t) []string {
	out := make([]string, int(n))
	if n == 0 {
		return out
	}
	for i, s := range unsafe.Slice(p, int(n)) {
		out[i] = goStr(s)
	}
	return out
}

// goPairs copies pairs libgak filled (a snapshot's fields) into a map.
func goPairs(p *C.gak_field, n C.size_t) map[string]string {
	out := make(map[string]string, int(n))
	if n == 0 {
		return out
	}
	for _, f := range unsafe.Slice(p, int(n)) {
		out[goStr(f.key)] = goStr(f.value)
	}
	return out
}

// nonNil is b, or an empty slice for nil (a present answer).
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// arena is C memory for one call's records and lists, freed at once: a
// bump allocator over calloc'd chunks, so a call with a list costs one
// allocation (and one cgo call to free it), not one per string.
type arena struct {
	blocks []unsafe.Pointer
	cur    unsafe.Pointer
	used   int
	size   int
}

// arenaBytes counts the C memory arenas ever allocated (the tests check
// that an oversized argument is refused before any is).
var arenaBytes atomic.Int64

// arenaChunk is the size of an arena's usual (and first) chunk.
const arenaChunk = 4096

// alloc returns n zeroed bytes of C memory, 8-byte aligned.
func (a *arena) alloc(n int) unsafe.Pointer {
	n = (n + 7) &^ 7
	if n == 0 {
		n = 8
	}
	if a.cur == nil || a.used+n > a.size {
		size := arenaChunk
		if n > size {
			size = n
		}
		p := C.calloc(1, C.size_t(size))
		if p == nil {
			panic("gak: out of C memory")
		}
		arenaBytes.Add(int64(size))
		a.blocks = append(a.blocks, p)
		a.cur, a.used, a.size = p, 0, size
	}
	p := unsafe.Add(a.cur, a.used)
	a.used += n
	return p
}

// str copies s into C memory.
func (a *arena) str(s string) C.gak_str {
	if len(s) == 0 {
		return C.gak_str{}
	}
	p := a.alloc(len(s))
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return C.gak_str{ptr: (*C.char)(p), len: C.size_t(len(s))}
}

// present copies s into C memory as a present value, even when empty.
func (a *arena) present(s string) C.gak_str {
	if len(s) == 0 {
		return C.gak_str{ptr: (*C.char)(a.alloc(1)), len: 0}
	}
	return a.str(s)
}

// strs copies a list of strings into C memory.
func (a *arena) strs(list []string) (*C.gak_str, C.size_t) {
	if len(list) == 0 {
		return nil, 0
	}
	p := (*C.gak_str)(a.alloc(len(list) * int(unsafe.Sizeof(C.gak_str{}))))
	items := unsafe.Slice(p, len(list))
	for i, s := range list {
		items[i] = a.str(s)
	}
	return p, C.size_t(len(list))
}

// bytes copies b into C memory (NULL when empty).
func (a *arena) bytes(b []byte) C.gak_bytes {
	if len(b) == 0 {
		return C.gak_bytes{}
	}
	p := a.alloc(len(b))
	copy(unsafe.Slice((*byte)(p), len(b)), b)
	return C.gak_bytes{ptr: (*C.uint8_t)(p), len: C.size_t(len(b))}
}

// optBytes copies b into C memory; nil is none, an empty slice present.
func (a *arena) optBytes(b []byte) C.gak_bytes {
	if b == nil {
		return C.gak_bytes{}
	}
	if len(b) == 0 {
		return C.gak_bytes{ptr: (*C.uint8_t)(a.alloc(1)), len: 0}
	}
	return a.bytes(b)
}

// pairs copies a map into C memory as pairs sorted by key (every key and
// value present, even when empty).
func (a *arena) pairs(m map[string]string) (*C.gak_field, C.size_t) {
	if len(m) == 0 {
		return nil, 0
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	p := (*C.gak_field)(a.alloc(len(keys) * int(unsafe.Sizeof(C.gak_field{}))))
	fields := unsafe.Slice(p, len(keys))
	for i, key := range keys {
		fields[i].key = a.present(key)
		fields[i].value = a.present(m[key])
	}
	return p, C.size_t(len(keys))
}

// free releases everything the arena holds.
func (a *arena) free() {
	for _, p := range a.blocks {
		C.free(p)
	}
	a.blocks, a.cur, a.used, a.size = nil, nil, 0, 0
}
