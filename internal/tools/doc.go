//go:build tools

// Package tools pins, behind the "tools" build tag, the modules the design names before every
// package that uses them exists, so that go.mod records them at the versions we chose.
package tools
