// Package handoff is the listener through which the proxy's inbound and outbound sides hand
// a connection they have started on (detected, a request head read on the lean path) to a
// net/http server: Listener's Accept returns the connections given to Handoff, one at a
// time, until Close.
//
// It owns no goroutines: Handoff blocks until the server accepts the connection or the
// listener is closed. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package handoff
