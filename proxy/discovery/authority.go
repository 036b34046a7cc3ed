package discovery

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/meridian-mesh/meridian/proxy/httpproxy"
)

// targetName is a normalised target authority: the path a GetDestination names (host:port),
// the key of the service it belongs to ("namespace/name") when it is a cluster name, and its
// address when the host is an IP.
type targetName struct {
	path    string
	service string
	ip      netip.AddrPort // valid for an IP host
}

// parseTarget normalises authority (host[:port], port defaultPort when absent); service is
// set when it is a cluster name under clusterDomain, ip when the host is an IP address.
func parseTarget(authority string, defaultPort uint16, clusterDomain string) (targetName, error) {
	a, err := httpproxy.ParseAuthority(authority, defaultPort)
	if err != nil {
		return targetName{}, fmt.Errorf("%w: %v", ErrNotMeshName, err)
	}
	n := targetName{path: a.String()}
	if ip, ok := a.Addr(); ok {
		n.ip = netip.AddrPortFrom(ip.Unmap(), a.Port)
	} else {
		n.service = serviceOf(a.Host, clusterDomain)
	}
	return n, nil
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
