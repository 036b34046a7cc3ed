// Package quote shows untrusted input in error messages: a short quoted prefix, never the
// whole of it. Every error that echoes what a client sent (a Get path, a policy workload, an
// identity name, an annotation value) quotes it with this package, so that a 1 MB input gives
// a message of a few hundred bytes that says how long the input was.
//
// Quoting is strconv.Quote's on valid UTF-8 (printable runes as they are, so "wéb" reads
// "wéb"; control characters escaped) with each byte of invalid UTF-8 escaped as \xNN; a prefix
// is cut at a rune boundary.
//
// It is pure (no I/O, no state) and imports the standard library only; it must not import
// any other Meridian package: `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`.
package quote
