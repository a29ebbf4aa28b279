package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	gak "github.com/gak-kernel/gak/host/go"
)

// Vector calls → the Go package's typed calls, and answers → the vectors'
// JSON, exactly as the Rust runner maps them
// (host/rust/cli/src/conformance/calls.rs).

// invalid is a value no caller should send (unknown enum string, number
// out of range): the call's answer is invalid-input.
type invalid struct{ why string }

func (e *invalid) Error() string { return e.why }

// malformed is a vector that does not say what it means (a missing field,
// a wrong JSON type): it fails the scenario.
type malformed struct{ why string }

func (e *malformed) Error() string { return e.why }

type obj = map[string]any

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

func getString(o any, key string) (string, error) {
	v, ok := field(o, key)
	if !ok {
		return "", &malformed{"missing " + key}
	}
	s, isStr := v.(string)
	if !isStr {
		return "", &malformed{fmt.Sprintf("%s: expected a string, got %s", key, show(v))}
	}
	return s, nil
}

func stringOrEmpty(o any, key string) (string, error) {
	if _, ok := field(o, key); !ok {
		return "", nil
	}
	return getString(o, key)
}

func optString(o any, key string) (*string, error) {
	if _, ok := field(o, key); !ok {
		return nil, nil
	}
	s, err := getString(o, key)
	return &s, err
}

func number(o any, key string) (uint64, error) {
	v, ok := field(o, key)
	if !ok {
		return 0, &malformed{"missing " + key}
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, &malformed{fmt.Sprintf("%s: expected a number, got %s", key, show(v))}
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, &invalid{fmt.Sprintf("%s: %s is not a u64", key, n)}
	}
	return u, nil
}

func optNumber(o any, key string) (*uint64, error) {
	if _, ok := field(o, key); !ok {
		return nil, nil
	}
	n, err := number(o, key)
	return &n, err
}

func boolean(o any, key string) (bool, error) {
	v, ok := field(o, key)
	if !ok {
		return false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, &malformed{fmt.Sprintf("%s: expected a bool, got %s", key, show(v))}
	}
	return b, nil
}

func stringsOf(o any, key string) ([]string, error) {
	v, ok := field(o, key)
	if !ok {
		return []string{}, nil
	}
	items, isArr := v.([]any)
	if !isArr {
		return nil, &malformed{fmt.Sprintf("%s: expected an array, got %s", key, show(v))}
	}
	out := make([]string, len(items))
	for i, item := range items {
		s, isStr := item.(string)
		if !isStr {
			return nil, &malformed{key + ": expected strings"}
		}
		out[i] = s
	}
	return out, nil
}

func bytesOf(o any, key string) ([]byte, error) {
	s, err := stringOrEmpty(o, key)
	return []byte(s), err
}

func object(o any, key string) (obj, error) {
	v, ok := field(o, key)
	if !ok {
		return nil, &malformed{"missing " + key}
	}
	m, isObj := v.(obj)
	if !isObj {
		return nil, &malformed{fmt.Sprintf("%s: expected an object, got %s", key, show(v))}
	}
	return m, nil
}

// ttl is a vector's ttl as a duration; one beyond what a Duration holds
// is refused as the kernel would (it is far above a year).
func ttl(o any) (time.Duration, error) {
	n, err := number(o, "ttl")
	if err != nil {
		return 0, err
	}
	if n > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, &invalid{fmt.Sprintf("ttl: %d ms is out of range", n)}
	}
	return time.Duration(n) * time.Millisecond, nil
}

func limit(o any) (int, error) {
	n, err := number(o, "limit")
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint32 {
		return 0, &invalid{fmt.Sprintf("limit: %d is out of range", n)}
	}
	return int(n), nil
}

func num(n uint64) json.Number { return json.Number(strconv.FormatUint(n, 10)) }

func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

func strs(list []string) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = s
	}
	return out
}

func snapshot(v any) (gak.Snapshot, error) {
	var s gak.Snapshot
	fields := map[string]string{}
	if raw, ok := field(v, "fields"); ok {
		m, isObj := raw.(obj)
		if !isObj {
			return s, &malformed{"fields: expected an object, got " + show(raw)}
		}
		for k, x := range m {
			str, isStr := x.(string)
			if !isStr {
				return s, &malformed{fmt.Sprintf("fields.%s: expected a string, got %s", k, show(x))}
			}
			fields[k] = str
		}
	}
	var err error
	if s.RunID, err = stringOrEmpty(v, "run-id"); err != nil {
		return s, err
	}
	seq, err := optNumber(v, "seq")
	if err != nil {
		return s, err
	}
	if seq != nil {
		s.Seq = *seq
	}
	if s.Fence, err = optNumber(v, "fence"); err != nil {
		return s, err
	}
	if s.Status, err = stringOrEmpty(v, "status"); err != nil {
		return s, err
	}
	if s.Done, err = stringsOf(v, "done"); err != nil {
		return s, err
	}
	s.Fields = fields
	return s, nil
}

func snapshotJSON(s gak.Snapshot) obj {
	fields := obj{}
	for k, v := range s.Fields {
		fields[k] = v
	}
	out := obj{"run-id": s.RunID, "seq": num(s.Seq), "status": s.Status, "done": strs(s.Done), "fields": fields}
	if s.Fence != nil {
		out["fence"] = num(*s.Fence)
	}
	return out
}

func status(v any) (gak.Status, error) {
	s, err := getString(v, "status")
	if err != nil {
		return "", err
	}
	switch s {
	case "succeeded":
		return gak.Succeeded, nil
	case "failed":
		return gak.Failed, nil
	}
	return "", &invalid{"unknown status " + strconv.Quote(s)}
}

func outcomeJSON(o gak.Outcome) obj {
	return obj{"status": string(o.Status), "result": text(o.Result)}
}

func action(v any) (gak.Action, error) {
	a, err := object(v, "action")
	if err != nil {
		return gak.Action{}, err
	}
	safety, err := optString(a, "retry-safety")
	if err != nil {
		return gak.Action{}, err
	}
	out := gak.Action{RetrySafety: gak.Safe}
	if safety != nil {
		switch *safety {
		case "safe":
		case "unsafe":
			out.RetrySafety = gak.Unsafe
		default:
			return gak.Action{}, &invalid{"unknown retry-safety " + strconv.Quote(*safety)}
		}
	}
	if out.Key, err = stringOrEmpty(a, "key"); err != nil {
		return out, err
	}
	if out.Resource, err = stringOrEmpty(a, "resource"); err != nil {
		return out, err
	}
	fp, err := optString(a, "fingerprint")
	if err != nil {
		return out, err
	}
	if fp != nil {
		if *fp == "" {
			// As cursor: the Go API says "" for none.
			return out, &invalid{"fingerprint: an empty id"}
		}
		out.Fingerprint = *fp
	}
	return out, nil
}

func lease(v any) (gak.Lease, error) {
	l, err := object(v, "lease")
	if err != nil {
		return gak.Lease{}, err
	}
	var out gak.Lease
	if out.Key, err = stringOrEmpty(l, "key"); err != nil {
		return out, err
	}
	if out.Resource, err = stringOrEmpty(l, "resource"); err != nil {
		return out, err
	}
	fence, err := optNumber(l, "fence")
	if err != nil {
		return out, err
	}
	if fence != nil {
		out.Fence = *fence
	}
	if out.Holder, err = stringOrEmpty(l, "holder"); err != nil {
		return out, err
	}
	until, err := optNumber(l, "until")
	if err != nil {
		return out, err
	}
	if until != nil {
		out.Until = *until
	}
	return out, nil
}

func leaseJSON(l gak.Lease) obj {
	return obj{"key": l.Key, "resource": l.Resource, "fence": num(l.Fence), "holder": l.Holder, "until": num(l.Until)}
}

func taskState(v any) (gak.TaskState, error) {
	s, err := optString(v, "state")
	if err != nil || s == nil {
		return "", err
	}
	switch gak.TaskState(*s) {
	case gak.TaskOpen, gak.TaskClaimed, gak.TaskDone, gak.TaskFailed:
		return gak.TaskState(*s), nil
	}
	return "", &invalid{"unknown state " + strconv.Quote(*s)}
}

func taskJSON(t gak.Task) obj {
	out := obj{"id": t.ID, "title": t.Title, "deps": strs(t.Deps), "state": string(t.State), "fence": num(t.Fence)}
	if t.Owner != "" {
		out["owner"] = t.Owner
	}
	if t.Token != "" {
		out["token"] = t.Token
	}
	if t.Until != nil {
		out["until"] = num(*t.Until)
	}
	return out
}

func keyState(v any) (gak.KeyState, error) {
	s, err := optString(v, "state")
	if err != nil || s == nil {
		return "", err
	}
	switch gak.KeyState(*s) {
	case gak.KeyCleared, gak.KeyInFlight, gak.KeyUncertain, gak.KeyCompleted:
		return gak.KeyState(*s), nil
	}
	return "", &invalid{"unknown key state " + strconv.Quote(*s)}
}

func keyInfoJSON(i gak.KeyInfo) obj {
	out := obj{"key": i.Key, "state": string(i.State), "retry-safety": string(i.RetrySafety), "resource": i.Resource}
	if i.Until != nil {
		out["until"] = num(*i.Until)
	}
	if i.CompletedAt != nil {
		out["completed-at"] = num(*i.CompletedAt)
	}
	if i.ReconcilingUntil != nil {
		out["reconciling-until"] = num(*i.ReconcilingUntil)
	}
	if i.Fingerprint != "" {
		out["fingerprint"] = i.Fingerprint
	}
	if i.State == gak.KeyUncertain || i.Reason != "" {
		out["reason"] = i.Reason
	}
	return out
}

func page(items []any, next string) obj {
	out := obj{"items": items}
	if next != "" {
		out["next"] = next
	}
	return out
}

// extra is what a call reported besides its answer: the code a reenter
// body's inner call answered.
type extra struct {
	inner *string
}

// dispatch runs one vector call: (answer, refusal) or a malformed step.
func dispatch(ctx context.Context, k *gak.Kernel, name string, args any, ex *extra) (any, error, error) {
	answer, refusal, err := call(ctx, k, name, args, ex)
	var inv *invalid
	if errors.As(err, &inv) {
		return nil, &gak.Refused{Code: gak.CodeInvalidInput, Message: inv.why}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: bad args: %v", name, err)
	}
	return answer, refusal, nil
}
