// Package accept is the accept loop of the proxy's listeners (inbound's and outbound's):
// Loop hands every accepted connection on, and retries the failures that pass (out of file
// descriptors, an aborted connection) after a backoff of 5 ms doubling to a second.
//
// It owns no goroutines: Loop runs on its caller's. Allowed imports: `std`. It must not
// import `github.com/meridian-mesh/meridian/...`.
package accept
