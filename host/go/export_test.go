package gak

// ArenaBytes is how much C memory the package's arenas have allocated so
// far (for tests: an oversized argument is refused before any copy).
func ArenaBytes() int64 { return arenaBytes.Load() }

// ABI is the ABI this package was compiled against (gak.h) and the one of
// the libgak it is linked with: (version, layout) each.
func ABI() (header, library [2]uint32) {
	return [2]uint32{compiledVersion, compiledLayout}, [2]uint32{linkedVersion, linkedLayout}
}

// CheckABI is the package's refusal of a library of ABI lib by a package
// compiled against header ("" when they match).
func CheckABI(header, lib [2]uint32) string { return checkABI(header[0], header[1], lib[0], lib[1]) }

// OnWaiting makes f run whenever a call starts waiting for a free
// connection (nil: nothing).
func OnWaiting(f func()) {
	if f == nil {
		waiting.Store(nil)
		return
	}
	waiting.Store(&f)
}
