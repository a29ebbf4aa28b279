package gak

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gak-kernel/gak/host/go/internal/secret"
)

// Values that carry a capability (a lease's holder, a task's token, a
// reconcile claim) or a password (a store URL) print without it under
// every verb (the contract's types: format_gen.go, generated; a Heartbeat
// and Options: here): fmt's default would print every field, and %#v, %x or a
// struct that embeds one would show the secret. Each such type has a
// String (what %v, %+v, %s and every other verb print; %q quotes it) and a
// GoString (what %#v prints: Go syntax, the secret replaced), both through
// Format. Structs that hold these types as fields (TaskPage, a caller's
// own) print them through the same Format.

const hidden = "<redacted>"

// redacted writes plain, or goSyntax for %#v, whatever the verb.
func redacted(f fmt.State, verb rune, plain, goSyntax string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = io.WriteString(f, goSyntax)
	case verb == 'q':
		_, _ = io.WriteString(f, strconv.Quote(plain))
	default:
		_, _ = io.WriteString(f, plain)
	}
}

// goSyntax is %#v of v (a copy with its secrets hidden, of a defined type
// without methods: plain), named as the exported type.
func goSyntax(plain interface{}, plainName, name string) string {
	return strings.Replace(fmt.Sprintf("%#v", plain), "gak."+plainName, "gak."+name, 1)
}

func hide(s string) string {
	if s == "" {
		return ""
	}
	return hidden
}

// optNumber prints an optional number: its value, or nil.
func optNumber[T uint64 | uint32 | uint8 | int32](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("%d", *p)
}

// String shows the heartbeat; its lease without the holder.
func (h Heartbeat) String() string {
	if h.st == nil {
		return "Heartbeat{}"
	}
	lost := "nil"
	if err := h.Refusal(); err != nil {
		lost = strconv.Quote(err.Error())
	}
	return fmt.Sprintf("Heartbeat{Lease:%s Renewals:%d Lost:%s}", h.Lease(), h.Renewals(), lost)
}

// GoString is the heartbeat in Go syntax; its lease without the holder.
func (h Heartbeat) GoString() string {
	if h.st == nil {
		return "gak.Heartbeat{}"
	}
	return fmt.Sprintf("gak.Heartbeat{Lease:%#v, Renewals:%d}", h.Lease(), h.Renewals())
}

// Format prints the heartbeat without the lease's holder, whatever the
// verb.
func (h Heartbeat) Format(f fmt.State, verb rune) { redacted(f, verb, h.String(), h.GoString()) }

type optionsPlain Options

// String shows the options; the store URL without its credentials.
func (o Options) String() string {
	return fmt.Sprintf("Options{Store:%q MaxConnections:%d ConnectionWait:%s StatementTimeout:%s RetryAttempts:%d RetryBase:%s RetryMax:%s}",
		secret.Redact(o.Store), o.MaxConnections, o.ConnectionWait, o.StatementTimeout, o.RetryAttempts, o.RetryBase, o.RetryMax)
}

// GoString is the options in Go syntax; the store URL without its
// credentials.
func (o Options) GoString() string {
	o.Store = secret.Redact(o.Store)
	return goSyntax(optionsPlain(o), "optionsPlain", "Options")
}

// Format prints the options without the store's credentials, whatever
// the verb.
func (o Options) Format(f fmt.State, verb rune) { redacted(f, verb, o.String(), o.GoString()) }
