// Package secret hides what no message may show (host/HOSTS.md rule 14):
// the credentials of a store URL.
package secret

import "strings"

// Redact is text with the userinfo of every URL in it — user and
// password, everything between "://" and the last "@" of the line — and
// the value of every "password=" option replaced by "***". A password may
// hold any character ("/ ? # @", spaces, "://" itself), so the userinfo
// runs to the last "@" of the line rather than to the first delimiter a URL
// parser would stop at, and the user goes with it (a URL may carry the
// secret where the user belongs): better one word too many hidden than a
// password shown.
func Redact(text string) string {
	var out strings.Builder
	rest := text
	for {
		at := strings.Index(rest, "://")
		if at < 0 {
			break
		}
		out.WriteString(rest[:at+3])
		tail := rest[at+3:]
		line := tail
		if nl := strings.IndexByte(tail, '\n'); nl >= 0 {
			line = tail[:nl]
		}
		if end := strings.LastIndexByte(line, '@'); end >= 0 {
			out.WriteString("***")
			tail = tail[end:]
		}
		rest = tail
	}
	out.WriteString(rest)
	redacted := out.String()
	parts := strings.Split(redacted, "password=")
	var b strings.Builder
	b.WriteString(parts[0])
	for _, part := range parts[1:] {
		b.WriteString("password=***")
		if end := strings.IndexAny(part, "& \n"); end >= 0 {
			b.WriteString(part[end:])
		}
	}
	return b.String()
}
