package gak_test

import (
	"fmt"
	"strings"
	"testing"

	gak "github.com/gak-kernel/gak/host/go"
)

// The package was compiled against the gak.h of the libgak it is linked
// with (tests/tests/go.rs builds a copy against a stale header and shows
// the refusal end to end).
func TestTheLinkedLibgakIsTheOneTheHeaderDescribes(t *testing.T) {
	header, library := gak.ABI()
	if header != library || header[0] == 0 {
		t.Fatalf("compiled against ABI %d (layout %08x), linked with ABI %d (layout %08x)", header[0], header[1], library[0], library[1])
	}
	if msg := gak.CheckABI(header, library); msg != "" {
		t.Fatalf("the matching library is refused: %s", msg)
	}
}

func TestAMismatchedLibgakIsRefusedNamingBothVersions(t *testing.T) {
	header, _ := gak.ABI()
	for _, library := range [][2]uint32{{header[0] + 1, header[1]}, {header[0], header[1] ^ 0x10}} {
		msg := gak.CheckABI(header, library)
		for _, want := range []string{
			fmt.Sprintf("libgak.a is ABI %d (layout %08x)", library[0], library[1]),
			fmt.Sprintf("compiled against a gak.h of ABI %d (layout %08x)", header[0], header[1]),
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("the refusal of %v does not say %q: %q", library, want, msg)
			}
		}
	}
}
