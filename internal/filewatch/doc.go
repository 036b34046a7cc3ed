// Package filewatch follows files and directories for changes: fsnotify notifications,
// debounced so that an editor's write-rename-chmod burst is one change, plus a periodic poll
// that runs whatever the notifications say. It is the one place Meridian watches files: the
// manifest directories (internal/manifest), the identity issuer, the injector's serving
// certificate and the proxy's certificates use it.
//
// It has one failure policy: nothing it meets stops it. When notifications cannot be had (no
// inotify instances left, a path that does not exist yet, a file system without events), it
// logs once at warn, keeps polling, and watches the path as soon as it can; a directory that is
// replaced, or moved away and back, is watched again.
//
// It owns its fsnotify watcher and nothing else; the caller decides what a change means. It
// imports fsnotify, zap and the standard library; it must not import any other Meridian
// package: `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`, `github.com/fsnotify/fsnotify`, `go.uber.org/zap/...`.
package filewatch
