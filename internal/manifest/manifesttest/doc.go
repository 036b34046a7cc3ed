// Package manifesttest holds what the tests of manifest loaders share: the tests of
// internal/manifest itself and of the components that load manifests through it (the
// destination's Dir source, policy's directory source). It offers WriteAtomic (a file written
// as editors and kubectl-style tools do), Events and Expect (the deliveries of a directory
// follower, waited for and then checked to be complete), IndentItem (a document as an item of
// a List), Seeds (example manifests as fuzz seeds) and CheckLocated (every error of a decode
// placed in its file).
//
// It is test-only: nothing outside _test.go files may import it. It imports internal/testutil,
// internal/manifest/yamltext and the standard library. It must not import `internal/manifest`,
// whose own tests use it, nor any other Meridian package but those two: `shard/...`,
// `policy/...`, `injector/...`, `cmd/...`.
//
// Allowed imports: `std`, `internal/testutil`, `internal/manifest/yamltext`.
package manifesttest
