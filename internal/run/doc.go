// Package run runs the long-lived parts of a process together, the one way every Meridian
// command does: a Group of components, each a Run(ctx) error that blocks until ctx ends. The
// group starts them all, stops them all when ctx ends or one fails, waits for them within a
// bound, and answers for their readiness (a component that implements Readier gates the
// process's /ready) and their warnings (Warner: what an operator should know while the
// process still serves, such as a manifest that does not parse).
//
// It imports the standard library only; it must not import any other Meridian package:
// `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`.
package run
