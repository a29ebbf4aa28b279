//go:build gakjsonprobe

package gak

// The vectors' JSON call shape for a claim, to measure a JSON ABI against
// the typed one (host/c/README.md "Typed structs or JSON"). Needs libgak
// built with --features json-call-probe and `go … -tags gakjsonprobe`.

/*
#cgo CFLAGS: -DGAK_JSON_CALL_PROBE
#include "gak.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"time"
)

type claimArgs struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	TTL   uint64 `json:"ttl"`
}

type taskJSON struct {
	ID    string    `json:"id"`
	Title string    `json:"title"`
	Deps  []string  `json:"deps"`
	State TaskState `json:"state"`
	Owner string    `json:"owner"`
	Token string    `json:"token"`
	Until *uint64   `json:"until"`
	Fence uint64    `json:"fence"`
}

// ClaimJSON is Claim through the JSON call shape: the arguments marshalled
// to JSON, the answer unmarshalled from it.
func (t Taskboard) ClaimJSON(ctx context.Context, id, agent string, ttl time.Duration) (Task, error) {
	k, err := t.k.enter(ctx)
	if err != nil {
		return Task{}, err
	}
	defer t.k.leave()
	args, err := json.Marshal(claimArgs{ID: id, Agent: agent, TTL: uint64(ttl / time.Millisecond)})
	if err != nil {
		return Task{}, err
	}
	var out C.gak_str
	if err := check(C.gak_probe_claim_json(k, str(string(args)), &out)); err != nil {
		return Task{}, err
	}
	text := goStr(out)
	C.gak_str_clear(&out)
	var got taskJSON
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		return Task{}, &StorageError{Message: err.Error()}
	}
	return Task(got), nil
}
