//go:build gakjsonprobe

package main

import (
	"time"

	gak "github.com/gak-kernel/gak/host/go"
)

var probe = func(k *gak.Kernel, id string) error {
	_, err := k.Taskboard().ClaimJSON(ctx, id, "w", time.Minute)
	return err
}
