// Package yamltext reads a YAML stream's bytes as the YAML decoder does: a stream that starts
// with a UTF-16 byte order mark is UTF-16 text, and its line breaks are YAML 1.1's. It is
// shared by internal/manifest (which
// counts a UTF-16 document's lines in its text) and its test helpers in manifesttest (which
// check that every error's line is in the file).
//
// It owns no state. Allowed imports: `std`. It must not import
// `github.com/meridian-mesh/meridian/...`.
package yamltext
