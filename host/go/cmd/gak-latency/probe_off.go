//go:build !gakjsonprobe

package main

import gak "github.com/gak-kernel/gak/host/go"

// probe is the JSON call shape's claim, built only with -tags gakjsonprobe.
var probe func(k *gak.Kernel, id string) error
