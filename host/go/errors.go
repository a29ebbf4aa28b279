package gak

/*
#include "gak.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// The contract's error codes (CodeNotFound … CodeStorage, and Codes) are
// generated from the WIT into codes_gen.go.

// Refused is the kernel's refusal: a contract outcome (the store is
// unchanged), never a storage failure. Code is the contract's kebab-case
// code; compare it with the Code* constants.
//
//	var refused *gak.Refused
//	if errors.As(err, &refused) && refused.Code == gak.CodeTaken { … }
type Refused struct {
	Code    string
	Message string
	// Err is the sink body's own error behind a write-failed refusal.
	Err error
}

func (e *Refused) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("gak: refused (%s): %s: %v", e.Code, e.Message, e.Err)
	}
	if e.Message == "" || e.Message == e.Code {
		return "gak: refused (" + e.Code + ")"
	}
	return "gak: refused (" + e.Code + "): " + e.Message
}

// Unwrap gives the sink body's error, if any.
func (e *Refused) Unwrap() error { return e.Err }

// StorageError is a failure of the store (or of the kernel itself): the
// call may or may not have taken effect if it failed at commit. Retry with
// care, as after any database error.
type StorageError struct {
	Message string
}

func (e *StorageError) Error() string { return "gak: storage: " + e.Message }

// Code returns the contract's code of err: a *Refused's Code, "storage"
// for a *StorageError, "" for any other error (or nil).
func Code(err error) string {
	var refused *Refused
	if errors.As(err, &refused) {
		return refused.Code
	}
	var storage *StorageError
	if errors.As(err, &storage) {
		return CodeStorage
	}
	return ""
}

func newError(code, message string) error {
	if code == CodeStorage {
		return &StorageError{Message: message}
	}
	return &Refused{Code: code, Message: message}
}

func refused(code, message string) error {
	return &Refused{Code: code, Message: code + ": " + message}
}

// check turns libgak's error into a Go error (and frees it).
func check(e *C.gak_error) error {
	if e == nil {
		return nil
	}
	code := C.GoString(C.gak_error_code(e))
	message := C.GoString(C.gak_error_message(e))
	C.gak_error_free(e)
	return newError(code, message)
}
