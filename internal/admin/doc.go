// Package admin serves the admin HTTP endpoints every Meridian process exposes:
// /metrics (Prometheus), /live, /ready and /debug/pprof/.
//
// It owns nothing but its listener; readiness is a callback supplied by the process.
// It imports only the standard library and the Prometheus client; it must not import
// `github.com/meridian-mesh/meridian/...`.
package admin
