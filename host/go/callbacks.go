package gak

/*
#include "gak.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

// The functions libgak calls back into, on the thread (and goroutine)
// that made the call. `user` points at a cgo.Handle of the call's Go
// state: a pointer to Go memory holding no Go pointer, used only during
// the call.

//export gakGoSinkBody
func gakGoSinkBody(user unsafe.Pointer, down *C.gak_downstream) C.int32_t {
	call := cgo.Handle(*(*uintptr)(user)).Value().(*sinkCall)
	return call.run(down)
}
