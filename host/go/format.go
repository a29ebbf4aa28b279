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
// every verb: fmt's default would print every field, and %#v, %x or a
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

type leasePlain Lease

// String shows the lease without its holder.
func (l Lease) String() string {
	return fmt.Sprintf("Lease{Key:%q Resource:%q Fence:%d Holder:%s Until:%d}", l.Key, l.Resource, l.Fence, hidden, l.Until)
}

// GoString is the lease in Go syntax, without its holder.
func (l Lease) GoString() string {
	l.Holder = hide(l.Holder)
	return goSyntax(leasePlain(l), "leasePlain", "Lease")
}

// Format prints the lease without its holder, whatever the verb.
func (l Lease) Format(f fmt.State, verb rune) { redacted(f, verb, l.String(), l.GoString()) }

type acquiredPlain Acquired

// String shows the answer; a granted lease without its holder.
func (a Acquired) String() string {
	switch a.Kind {
	case Granted:
		return fmt.Sprintf("Acquired{Kind:%s Lease:%s}", a.Kind, a.Lease)
	case Replayed:
		return fmt.Sprintf("Acquired{Kind:%s Result:%q}", a.Kind, a.Result)
	case Uncertain:
		return fmt.Sprintf("Acquired{Kind:%s Reason:%q}", a.Kind, a.Reason)
	case Contended:
		return fmt.Sprintf("Acquired{Kind:%s Until:%d}", a.Kind, a.Until)
	}
	return fmt.Sprintf("Acquired{Kind:%s}", a.Kind)
}

// GoString is the answer in Go syntax, its lease's holder hidden.
func (a Acquired) GoString() string {
	a.Lease.Holder = hide(a.Lease.Holder)
	return goSyntax(acquiredPlain(a), "acquiredPlain", "Acquired")
}

// Format prints the answer without the lease's holder, whatever the verb.
func (a Acquired) Format(f fmt.State, verb rune) { redacted(f, verb, a.String(), a.GoString()) }

type taskPlain Task

// String shows the task without its token.
func (t Task) String() string {
	until := "nil"
	if t.Until != nil {
		until = strconv.FormatUint(*t.Until, 10)
	}
	return fmt.Sprintf("Task{ID:%q Title:%q Deps:%q State:%s Owner:%q Token:%s Until:%s Fence:%d}", t.ID, t.Title, t.Deps, t.State, t.Owner, hide(t.Token), until, t.Fence)
}

// GoString is the task in Go syntax, without its token.
func (t Task) GoString() string {
	t.Token = hide(t.Token)
	return goSyntax(taskPlain(t), "taskPlain", "Task")
}

// Format prints the task without its token, whatever the verb.
func (t Task) Format(f fmt.State, verb rune) { redacted(f, verb, t.String(), t.GoString()) }

type claimPlain ReconcileClaim

// String shows the claim without its capability.
func (c ReconcileClaim) String() string {
	return fmt.Sprintf("ReconcileClaim{Claim:%s Until:%d}", hidden, c.Until)
}

// GoString is the claim in Go syntax, without its capability.
func (c ReconcileClaim) GoString() string {
	c.Claim = hide(c.Claim)
	return goSyntax(claimPlain(c), "claimPlain", "ReconcileClaim")
}

// Format prints the claim without its capability, whatever the verb.
func (c ReconcileClaim) Format(f fmt.State, verb rune) { redacted(f, verb, c.String(), c.GoString()) }

type resolutionPlain Resolution

// String shows the verdict without the reconcile claim.
func (r Resolution) String() string {
	return fmt.Sprintf("Resolution{Applied:%t Result:%q ForceRetryable:%t Claim:%s}", r.Applied, r.Result, r.ForceRetryable, hide(r.Claim))
}

// GoString is the verdict in Go syntax, without the reconcile claim.
func (r Resolution) GoString() string {
	r.Claim = hide(r.Claim)
	return goSyntax(resolutionPlain(r), "resolutionPlain", "Resolution")
}

// Format prints the verdict without the claim, whatever the verb.
func (r Resolution) Format(f fmt.State, verb rune) { redacted(f, verb, r.String(), r.GoString()) }

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
