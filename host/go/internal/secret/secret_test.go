package secret

import (
	"strings"
	"testing"
)

func TestRedactHidesEveryPartOfTheUserinfo(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://alice:s3cr3t@db:5432/x", "postgres://***@db:5432/x"},
		{"postgres://Qab3x7Y@127.0.0.1:1/test", "postgres://***@127.0.0.1:1/test"},
		{"postgres://alice:a@b/c?d#e f@host/x?schema=s", "postgres://***@host/x?schema=s"},
		{"postgres://alice:x://y@host/db", "postgres://***@host/db"},
		{"memory:", "memory:"},
		{"sqlite:/tmp/a@b.db", "sqlite:/tmp/a@b.db"},
		{"opening postgres://u:p@h/d: refused\nthen mysql://v:q@h2/e", "opening postgres://***@h/d: refused\nthen mysql://***@h2/e"},
		{"host=db password=hunter2 user=alice", "host=db password=*** user=alice"},
		{"postgres://host/db", "postgres://host/db"},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Every printable character in a password is hidden with it.
	for ch := 0x20; ch < 0x7f; ch++ {
		url := "postgres://alice:Qab2" + string(rune(ch)) + "Zyx9@127.0.0.1:1/test"
		if got := Redact(url); strings.Contains(got, "Qab2") || strings.Contains(got, "Zyx9") {
			t.Errorf("Redact(%q) = %q", url, got)
		}
	}
}
