// Package logging builds the structured zap loggers every Meridian process uses. It imports
// zap; it must not import `github.com/meridian-mesh/meridian/...`.
package logging
