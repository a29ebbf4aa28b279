// Package conformance replays the language-neutral vectors (VECTORS.md,
// tests/vectors) and the shared host-protocol cases (tests/host-protocol)
// through the Go package's typed API: the proof that this host keeps the
// contract, with the behaviour and output of `gak conformance`.
package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	gak "github.com/gak-kernel/gak/host/go"
)

// Scenario is one scenario of a vector file.
type Scenario struct {
	Name  string
	Steps []any
}

var reserved = map[string]bool{"any": true, "none": true, "hex128": true}

// decode parses JSON keeping every number's text (u64s exceed float64).
func decode(text []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// ParseFile parses a file holding one scenario object or an array of them.
func ParseFile(text []byte) ([]Scenario, error) {
	v, err := decode(text)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case map[string]any:
		items = []any{x}
	default:
		return nil, fmt.Errorf("$: expected a scenario object or an array of them")
	}
	out := make([]Scenario, 0, len(items))
	for i, item := range items {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$[%d]: expected a scenario object", i)
		}
		var s Scenario
		if name, present := obj["scenario"]; present {
			str, ok := name.(string)
			if !ok {
				return nil, fmt.Errorf("$[%d].scenario: expected a string", i)
			}
			s.Name = str
		}
		steps, ok := obj["steps"].([]any)
		if !ok {
			return nil, fmt.Errorf("$[%d].steps: expected an array", i)
		}
		s.Steps = steps
		out = append(out, s)
	}
	return out, nil
}

// Binds are the values steps bound by name.
type Binds map[string]any

func (b Binds) clone() Binds {
	c := make(Binds, len(b))
	for k, v := range b {
		c[k] = v
	}
	return c
}

func (b Binds) bound(name string) (any, error) {
	v, ok := b[name]
	if !ok {
		return nil, fmt.Errorf("$%s is not bound", name)
	}
	return v, nil
}

// substitute replaces $name, $$literal, {"$repeat": S, "times": N} and
// {"$merge": name, …} in call args.
func substitute(v any, binds Binds) (any, error) {
	switch x := v.(type) {
	case string:
		if strings.HasPrefix(x, "$$") {
			return x[1:], nil
		}
		if strings.HasPrefix(x, "$") {
			return binds.bound(x[1:])
		}
		return x, nil
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			s, err := substitute(item, binds)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case map[string]any:
		if unit, ok := x["$repeat"]; ok {
			s, ok := unit.(string)
			if !ok {
				return nil, fmt.Errorf("$repeat: expected a string")
			}
			times, ok := x["times"].(json.Number)
			n, err := strconv.ParseUint(string(times), 10, 32)
			if !ok || err != nil {
				return nil, fmt.Errorf("$repeat: expected times")
			}
			return strings.Repeat(s, int(n)), nil
		}
		if name, ok := x["$merge"]; ok {
			n, ok := name.(string)
			if !ok {
				return nil, fmt.Errorf("$merge: expected a name")
			}
			base, err := binds.bound(n)
			if err != nil {
				return nil, err
			}
			obj, ok := base.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("$merge: $%s is not an object", n)
			}
			merged := make(map[string]any, len(obj))
			for k, val := range obj {
				merged[k] = val
			}
			for k, val := range x {
				if k == "$merge" {
					continue
				}
				s, err := substitute(val, binds)
				if err != nil {
					return nil, err
				}
				merged[k] = s
			}
			return merged, nil
		}
		out := make(map[string]any, len(x))
		for k, val := range x {
			s, err := substitute(val, binds)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	}
	return v, nil
}

func isHex128(v any) bool {
	s, ok := v.(string)
	if !ok || len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// matches says whether got (present when ok) matches the expected pattern.
func matches(want any, got any, ok bool, binds Binds) (bool, error) {
	present := ok && got != nil
	switch w := want.(type) {
	case string:
		switch {
		case w == "$any":
			return present, nil
		case w == "$none":
			return !present, nil
		case w == "$hex128":
			return ok && isHex128(got), nil
		case strings.HasPrefix(w, "$$"):
			return ok && got == any(w[1:]), nil
		case strings.HasPrefix(w, "$"):
			b, err := binds.bound(w[1:])
			if err != nil {
				return false, err
			}
			return ok && reflect.DeepEqual(got, b), nil
		}
		return ok && got == any(w), nil
	case map[string]any:
		if ne, only := w["$ne"]; only && len(w) == 1 {
			name, isName := ne.(string)
			if !isName {
				return false, fmt.Errorf("$ne: expected a name")
			}
			b, err := binds.bound(name)
			if err != nil {
				return false, err
			}
			return present && !reflect.DeepEqual(got, b), nil
		}
		actual, isObj := got.(map[string]any)
		if !ok || !isObj {
			return false, nil
		}
		for k, sub := range w {
			v, has := actual[k]
			m, err := matches(sub, v, has, binds)
			if err != nil || !m {
				return false, err
			}
		}
		return true, nil
	case []any:
		actual, isArr := got.([]any)
		if !ok || !isArr || len(actual) != len(w) {
			return false, nil
		}
		for i := range w {
			m, err := matches(w[i], actual[i], true, binds)
			if err != nil || !m {
				return false, err
			}
		}
		return true, nil
	case nil:
		return !present, nil
	}
	return ok && reflect.DeepEqual(got, want), nil
}

func lookup(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for _, part := range strings.Split(path, ".") {
		switch x := v.(type) {
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		case map[string]any:
			next, ok := x[part]
			if !ok {
				return nil, false
			}
			v = next
		default:
			return nil, false
		}
	}
	return v, true
}

// show renders a value as JSON text for messages.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// errorNames are the contract's codes (generated from the WIT).
var errorNames = map[string]bool{}

func init() {
	for _, n := range gak.Codes {
		errorNames[n] = true
	}
}
