// Package logging builds the structured zap loggers every Meridian process uses. It imports
// zap and internal/quote (to quote a bad level by a prefix); it must not import
// `github.com/meridian-mesh/meridian/shard/...`, `github.com/meridian-mesh/meridian/proxy/...`,
// `github.com/meridian-mesh/meridian/cmd/...` or any other Meridian package but internal/quote.
package logging
