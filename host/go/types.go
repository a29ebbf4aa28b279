package gak

// The contract's records, enums and variants are generated from the WIT
// into types_gen.go (and how fmt prints those holding a capability into
// format_gen.go); what the Go API adds to them is here.
//
// Times (Until, CompletedAt, Prune's before) are milliseconds since the
// Unix epoch, as the kernel's clock reads them; a ttl is a time.Duration
// of whole milliseconds (sub-millisecond parts are dropped), 1 ms to a
// year. An optional number is a pointer (nil: absent); an optional string
// is "" when absent, since no id, token or fingerprint may be empty; an
// enum is "" when absent (any, in a list's filter; its default, or
// CodeInvalidInput, in a required field).

// Applied is how a Runner's run ended when the body ran now and its result
// was recorded (Ran.Kind only: Acquire never answers it).
const Applied Kind = "applied"

// NewAction is an action that is safe to retry, without a fingerprint.
func NewAction(key, resource string) Action {
	return Action{Key: key, Resource: resource, RetrySafety: Safe}
}

// Ptr is a pointer to v (for the optional numbers of a Snapshot).
func Ptr[T any](v T) *T { return &v }
