package gak

// ArenaBytes is how much C memory the package's arenas have allocated so
// far (for tests: an oversized argument is refused before any copy).
func ArenaBytes() int64 { return arenaBytes.Load() }
