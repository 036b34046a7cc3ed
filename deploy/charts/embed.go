package charts

import (
	"embed"
	"io/fs"
)

// files holds the chart directory, dotfiles included.
//
//go:embed all:meridian
var files embed.FS

// Meridian returns the chart as a file system rooted at the chart directory (Chart.yaml,
// values.yaml, values-ha.yaml, values.schema.json, templates/, crds/).
func Meridian() fs.FS {
	sub, err := fs.Sub(files, "meridian")
	if err != nil {
		panic("charts: the embedded chart has no meridian directory: " + err.Error()) // cannot happen: checked at build time by go:embed
	}
	return sub
}
