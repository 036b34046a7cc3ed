package discovery

import (
	"fmt"
	"strings"

	"github.com/meridian-mesh/meridian/proxy/httpproxy"
)

// parseTarget normalises authority (host[:port], port defaultPort when absent) into the path
// a GetDestination names, host:port, and the key of the service it belongs to
// ("namespace/name") when it is a cluster name under clusterDomain, else "".
func parseTarget(authority string, defaultPort uint16, clusterDomain string) (path, service string, err error) {
	a, err := httpproxy.ParseAuthority(authority, defaultPort)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrNotMeshName, err)
	}
	return a.String(), serviceOf(a.Host, clusterDomain), nil
}

// serviceOf returns "namespace/name" for a normalised host <name>.<namespace>.svc.<domain>
// or <hostname>.<name>.<namespace>.svc.<domain> (a pod's DNS name under a headless service),
// and "" for any other host. It is the key the resolver remembers a service's owner under:
// only a hint (a wrong owner redirects again), so it needs no more than the shape of the name.
func serviceOf(host, clusterDomain string) string {
	rest, ok := strings.CutSuffix(host, ".svc."+clusterDomain)
	if !ok || clusterDomain == "" {
		return ""
	}
	labels := strings.Split(rest, ".")
	if n := len(labels); n == 2 || n == 3 {
		name, ns := labels[n-2], labels[n-1]
		if name != "" && ns != "" {
			return ns + "/" + name
		}
	}
	return ""
}
