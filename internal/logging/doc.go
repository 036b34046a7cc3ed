// Package logging builds the structured zap loggers every Meridian process uses.
package logging
