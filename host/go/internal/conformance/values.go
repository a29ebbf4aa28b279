package conformance

// The vectors' JSON shape (host/gen/README.md, "The vectors' JSON shape"):
// the primitives the generated readers and writers of exports_gen.go
// compose — readX(v, at) reads a JSON value v (nil when absent or null) at
// path at, writers make the answer's JSON — and the key-based helpers the
// host-protocol cases use. Absent values are the type's zero (a string
// "", a number 0, a list [], an enum its first case, an option none); an
// absent record, or a value of the wrong JSON type, is a malformed vector;
// an enum name the contract does not have, or a number outside its type,
// is the call's invalid-input.

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// invalid is a value no caller should send (unknown enum string, number
// out of range): the call's answer is invalid-input.
type invalid struct{ why string }

func (e *invalid) Error() string { return e.why }

// malformed is a vector that does not say what it means (a missing record,
// a wrong JSON type): it fails the scenario.
type malformed struct{ why string }

func (e *malformed) Error() string { return e.why }

type obj = map[string]any

// field is the value under key of an object; null is absent.
func field(o any, key string) (any, bool) {
	m, ok := o.(obj)
	if !ok {
		return nil, false
	}
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// arg is the argument key of a call's args (nil when absent).
func arg(a any, key string) any {
	v, _ := field(a, key)
	return v
}

func expected(at, what string, v any) error {
	return &malformed{fmt.Sprintf("%s: expected %s, got %s", at, what, show(v))}
}

// readString reads a string; absent is "".
func readString(v any, at string) (string, error) {
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", expected(at, "a string", v)
	}
	return s, nil
}

// readOptID reads an optional string the Go API spells "" when absent: a
// present "" cannot be sent, and is answered as the kernel answers an
// empty id (invalid-input).
func readOptID(v any, at string) (string, error) {
	s, err := readString(v, at)
	if err == nil && v != nil && s == "" {
		return "", &invalid{at + ": an empty id (the Go API says \"\" for none)"}
	}
	return s, err
}

// readOptString reads an optional string whose presence the Go API says
// otherwise (by a method of its own): the string and whether it is there.
func readOptString(v any, at string) (string, bool, error) {
	s, err := readString(v, at)
	return s, v != nil, err
}

// readBytes reads bytes given as a UTF-8 string; absent is empty.
func readBytes(v any, at string) ([]byte, error) {
	s, err := readString(v, at)
	return []byte(s), err
}

// readOptBytes reads optional bytes: nil when absent, a non-nil slice
// (maybe empty) when present.
func readOptBytes(v any, at string) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	s, err := readString(v, at)
	b := []byte(s)
	if b == nil {
		b = []byte{}
	}
	return b, err
}

// readU64 reads a number; absent is 0, one that is not a u64 is invalid.
func readU64(v any, at string) (uint64, error) {
	if v == nil {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, expected(at, "a number", v)
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, &invalid{fmt.Sprintf("%s: %s is not a u64", at, n)}
	}
	return u, nil
}

// readOptU64 reads an optional number: nil when absent.
func readOptU64(v any, at string) (*uint64, error) {
	if v == nil {
		return nil, nil
	}
	n, err := readU64(v, at)
	return &n, err
}

func readBounded(v any, at string, max uint64) (uint64, error) {
	n, err := readU64(v, at)
	if err == nil && n > max {
		return 0, &invalid{fmt.Sprintf("%s: %d is out of range", at, n)}
	}
	return n, err
}

// readU32 reads a number no u32 refuses.
func readU32(v any, at string) (uint32, error) {
	n, err := readBounded(v, at, math.MaxUint32)
	return uint32(n), err
}

// readOptU32 reads an optional number no u32 refuses: nil when absent.
func readOptU32(v any, at string) (*uint32, error) {
	if v == nil {
		return nil, nil
	}
	n, err := readU32(v, at)
	return &n, err
}

// readS32 reads a number no s32 refuses; absent is 0.
func readS32(v any, at string) (int32, error) {
	if v == nil {
		return 0, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, expected(at, "a number", v)
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		return 0, &invalid{fmt.Sprintf("%s: %s is not an s32", at, n)}
	}
	return int32(i), nil
}

// readOptS32 reads an optional number no s32 refuses: nil when absent.
func readOptS32(v any, at string) (*int32, error) {
	if v == nil {
		return nil, nil
	}
	n, err := readS32(v, at)
	return &n, err
}

// readU8 reads a number no u8 refuses.
func readU8(v any, at string) (uint8, error) {
	n, err := readBounded(v, at, math.MaxUint8)
	return uint8(n), err
}

// readCount reads a u32 argument the Go API takes as an int (a limit).
func readCount(v any, at string) (int, error) {
	n, err := readBounded(v, at, math.MaxUint32)
	return int(n), err
}

// readTTL reads a ttl as a duration; one beyond what a Duration holds is
// refused as the kernel would (it is far above a year).
func readTTL(v any, at string) (time.Duration, error) {
	n, err := readBounded(v, at, uint64(math.MaxInt64/int64(time.Millisecond)))
	return time.Duration(n) * time.Millisecond, err
}

// readBool reads a boolean; absent is false.
func readBool(v any, at string) (bool, error) {
	if v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, expected(at, "a bool", v)
	}
	return b, nil
}

// readStrings reads a list of strings; absent is empty.
func readStrings(v any, at string) ([]string, error) {
	return list(readString)(v, at)
}

// readPairs reads an object of strings (a snapshot's fields); absent is
// empty.
func readPairs(v any, at string) (map[string]string, error) {
	out := map[string]string{}
	if v == nil {
		return out, nil
	}
	m, ok := v.(obj)
	if !ok {
		return nil, expected(at, "an object", v)
	}
	for k, x := range m {
		s, ok := x.(string)
		if !ok {
			return nil, expected(at+"."+k, "a string", x)
		}
		out[k] = s
	}
	return out, nil
}

// readObject reads a record's object; an absent record is malformed.
func readObject(v any, at string) (obj, error) {
	if v == nil {
		return nil, &malformed{"missing " + at}
	}
	m, ok := v.(obj)
	if !ok {
		return nil, expected(at, "an object", v)
	}
	return m, nil
}

// readCase reads an enum's case name (absent: the first case); a name
// the contract does not have is invalid.
func readCase(v any, at, what string, cases ...string) (string, error) {
	if v == nil {
		return cases[0], nil
	}
	s, err := readString(v, at)
	if err != nil {
		return "", err
	}
	for _, c := range cases {
		if s == c {
			return s, nil
		}
	}
	return "", &invalid{fmt.Sprintf("%s: unknown %s %q", at, what, s)}
}

// optional reads with read unless the value is absent: then the zero T
// (an enum's "", none).
func optional[T any](read func(any, string) (T, error)) func(any, string) (T, error) {
	return func(v any, at string) (T, error) {
		var zero T
		if v == nil {
			return zero, nil
		}
		return read(v, at)
	}
}

// pointer reads with read unless the value is absent: then nil.
func pointer[T any](read func(any, string) (T, error)) func(any, string) (*T, error) {
	return func(v any, at string) (*T, error) {
		if v == nil {
			return nil, nil
		}
		x, err := read(v, at)
		return &x, err
	}
}

// list reads an array with read per item (absent: empty).
func list[T any](read func(any, string) (T, error)) func(any, string) ([]T, error) {
	return func(v any, at string) ([]T, error) {
		out := []T{}
		if v == nil {
			return out, nil
		}
		items, ok := v.([]any)
		if !ok {
			return nil, expected(at, "an array", v)
		}
		for i, item := range items {
			x, err := read(item, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
}

func num(n uint64) json.Number { return json.Number(strconv.FormatUint(n, 10)) }

func snum(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }

// text is bytes as the vectors' JSON: a string (invalid UTF-8 replaced).
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

func strs(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

func pairs(m map[string]string) obj {
	out := obj{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// writeList writes each item with write.
func writeList[T any](items []T, write func(T) obj) []any {
	out := make([]any, len(items))
	for i, x := range items {
		out[i] = write(x)
	}
	return out
}

// getString is the string under key; absent is malformed.
func getString(o any, key string) (string, error) {
	v, ok := field(o, key)
	if !ok {
		return "", &malformed{"missing " + key}
	}
	return readString(v, key)
}

// stringOrEmpty is the string under key; absent is "".
func stringOrEmpty(o any, key string) (string, error) {
	return readString(arg(o, key), key)
}

// ttl is the ttl under key "ttl", as a duration.
func ttl(o any) (time.Duration, error) {
	return readTTL(arg(o, "ttl"), "ttl")
}
