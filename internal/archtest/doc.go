// Package archtest holds the tests of the repository's shape rather than of its behaviour:
// every package has a doc.go whose "must not import" sentence names, in backquotes, the
// packages it must not depend on (directly or through others), and the test checks each
// package's dependencies against it; a doc.go may also list its "Allowed imports:" (`std` is
// the standard library), and then every direct import must be one of them; test-only packages (their doc says "test-only") are
// imported by no production code. No hand-written Go file is over 600 lines, and no
// function over 120 (size_test.go; generated files are exempt).
//
// Patterns are Go import paths, relative to the module for Meridian's own packages
// (`shard`, `shard/...`, `cmd/...`) and absolute for others (`k8s.io/client-go/...`);
// `github.com/meridian-mesh/meridian/...` means every other Meridian package.
//
// It has no code outside its tests. It must not import `github.com/meridian-mesh/meridian/...`.
package archtest
