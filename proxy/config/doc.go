// Package config is the proxy's configuration: the LINKERD2_PROXY_* environment the injector
// writes, with linkerd2-proxy's names, defaults and meanings, and a command-line flag for
// every variable (the name without the prefix, lower case, with dashes:
// LINKERD2_PROXY_INBOUND_LISTEN_ADDR is --inbound-listen-addr) for local runs. A flag set on
// the command line wins over the environment.
//
// It is pure: FromEnv takes the lookup function, and every bad value is an error naming the
// variable and quoting at most a short prefix of the value. Allowed imports: `std`.
// It must not import `github.com/meridian-mesh/meridian/...`.
package config
