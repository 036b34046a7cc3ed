package translator

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/snapshot"
)

// ParseIPAuthority parses a GetProfile path whose host is an IP address ("10.0.0.1",
// "10.0.0.1:8080", "[fd00::1]:8080", "[fd00::1]" or "fd00::1"), the port DefaultPort when
// absent. It reports false for anything else, including an address with a zone or a port
// outside 1-65535; ParseAuthority says why.
func ParseIPAuthority(path string) (netip.AddrPort, bool) {
	if ap, err := netip.ParseAddrPort(path); err == nil {
		if ap.Port() == 0 || ap.Addr().Zone() != "" {
			return netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
	}
	host := path
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), DefaultPort), true
}

// PodIPs returns the pod-network addresses of pod that it may be found by: none for a pod on
// the host network, a terminated one (Succeeded or Failed) or one being deleted, as Linkerd's
// pod IP index. Addresses that do not parse are skipped. The slice is the pod's and must not be
// modified.
func PodIPs(pod *Pod) []netip.Addr {
	if pod == nil || !findable(pod.hostNetwork, pod.deletion != nil, pod.Phase()) {
		return nil
	}
	return pod.ips
}

// findable reports whether a pod may be found by its addresses (PodIPs).
func findable(hostNetwork, deleting bool, phase corev1.PodPhase) bool {
	return !hostNetwork && !deleting && phase != corev1.PodSucceeded && phase != corev1.PodFailed
}

// ClusterIPs returns the cluster IPs of svc (none for a headless or ExternalName Service).
func ClusterIPs(svc *corev1.Service) []netip.Addr {
	if svc == nil {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// IPEndpoint is what GetProfile serves for an IP address that is not a Service's: the
// endpoint and whether its port is opaque.
type IPEndpoint struct {
	Endpoint *snapshot.Endpoint
	Opaque   bool
}

// PodEndpoint returns what GetProfile serves for addr, an address of pod (nil: an address
// that no pod has), as Linkerd's endpoint profile: for a running pod, the address with the
// pod's metric labels and its namespace, and, when the pod is meshed and the port does not
// skip the inbound proxy, its identity, HTTP/2 client parameters and protocol hint; opaque
// when the port is opaque by the pod's annotation or the defaults (IsOpaque), or by a Server
// of servers (ServerOpaque). For no pod, or a pod that is not running (pending, say), the
// bare address, opaque on the default opaque ports.
func PodEndpoint(cfg Config, pod *Pod, addr netip.AddrPort, servers []*Server) IPEndpoint {
	e := &snapshot.Endpoint{Addr: addr, Weight: DefaultWeight}
	port := uint32(addr.Port())
	if pod == nil || pod.Phase() != corev1.PodRunning {
		return IPEndpoint{Endpoint: e, Opaque: IsOpaque(cfg, nil, port)}
	}
	var b batch
	ns := pod.Namespace()
	e.SetPod(pod.Name, ns, pod.NodeName())
	labels := podLabels(cfg, pod, "", &b)
	out := make([]snapshot.Label, 0, len(labels)+1)
	for _, l := range labels {
		if l.Key != LabelKeyZoneLocality {
			out = append(out, l)
		}
	}
	e.Labels = sortedLabels(append(out, snapshot.Label{Key: LabelKeyNamespace, Value: ns}))
	opaque := IsOpaque(cfg, pod, port) || ServerOpaque(servers, pod, port)
	setMeshed(cfg, e, pod, port, opaque, &b)
	return IPEndpoint{Endpoint: e, Opaque: opaque}
}
