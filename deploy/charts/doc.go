// Package charts embeds the Helm chart in meridian/ (deploy/charts/meridian) into the binary,
// so that `meridian install` renders exactly the chart that `helm install` installs: the
// directory stays the one copy, and this package only exposes it as an fs.FS.
//
// It holds no logic (rendering is internal/chart's job). It must not import
// `github.com/meridian-mesh/meridian/...`.
package charts
