package translator

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Annotations and labels the translation reads.
const (
	// LabelControlPlaneNS marks a meshed pod; its value is the control plane's namespace.
	LabelControlPlaneNS = "linkerd.io/control-plane-ns"
	// AnnotationOpaquePorts lists a pod's opaque ports (numbers, ranges, container port names);
	// present but empty means none.
	AnnotationOpaquePorts = "config.linkerd.io/opaque-ports"
	// AnnotationSkipInboundPorts lists ports that bypass the pod's inbound proxy.
	AnnotationSkipInboundPorts = "config.linkerd.io/skip-inbound-ports"
	// LabelPodTemplateHash is set by the Deployment controller on the pods of a ReplicaSet.
	LabelPodTemplateHash = "pod-template-hash"
	// LabelServiceName names the Service an EndpointSlice belongs to.
	LabelServiceName = "kubernetes.io/service-name"
)

// PortRange is an inclusive range of ports, Lo <= Hi; a single port has Lo == Hi.
type PortRange struct{ Lo, Hi uint32 }

// Contains reports whether p is in r.
func (r PortRange) Contains(p uint32) bool { return r.Lo <= p && p <= r.Hi }

// PortList is a parsed port-list annotation: ports, ranges and container port names.
type PortList struct {
	Ranges []PortRange
	// Names are container port names, resolved against a pod's containers (see IsOpaque).
	Names []string
}

// Contains reports whether p is in one of the ranges (names are not resolved).
func (l PortList) Contains(p uint32) bool {
	for _, r := range l.Ranges {
		if r.Contains(p) {
			return true
		}
	}
	return false
}

// ParsePortList parses a port-list annotation value such as "25,3306, 4000-4100,mysql":
// comma-separated ports (1-65535), inclusive ranges "lo-hi" and container port names. Spaces
// around items are ignored; the empty (or all-space) string is the empty list. It reports the
// first bad item. IsOpaque and IsSkippedInbound, which must not fail, skip bad items instead.
func ParsePortList(s string) (PortList, error) {
	var l PortList
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		r, name, err := parsePortItem(item)
		if err != nil {
			return PortList{}, fmt.Errorf("port list %s, item %d: %w", quote.Prefix(s, 64), i+1, err)
		}
		if name != "" {
			l.Names = append(l.Names, name)
		} else {
			l.Ranges = append(l.Ranges, r)
		}
	}
	return l, nil
}

// parsePortItem parses one trimmed item: a port, a range, or (when it has no digit-only form)
// a container port name. It does not allocate.
func parsePortItem(item string) (PortRange, string, error) {
	if item == "" {
		return PortRange{}, "", fmt.Errorf("empty item")
	}
	if lo, hi, ok := strings.Cut(item, "-"); ok && isDigits(strings.TrimSpace(lo)) {
		a, err := parsePortNumber(strings.TrimSpace(lo))
		if err != nil {
			return PortRange{}, "", err
		}
		b, err := parsePortNumber(strings.TrimSpace(hi))
		if err != nil {
			return PortRange{}, "", err
		}
		if a > b {
			return PortRange{}, "", fmt.Errorf("range %s ends before it starts", quote.Prefix(item, 64))
		}
		return PortRange{a, b}, "", nil
	}
	if isDigits(item) {
		p, err := parsePortNumber(item)
		if err != nil {
			return PortRange{}, "", err
		}
		return PortRange{p, p}, "", nil
	}
	if err := checkPortName(item); err != nil {
		return PortRange{}, "", err
	}
	return PortRange{}, item, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parsePortNumber(s string) (uint32, error) {
	if !isDigits(s) {
		return 0, fmt.Errorf("%s is not a port number", quote.Prefix(s, 64))
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %s is out of range 1-65535", quote.MessagePrefix(s, 64))
	}
	return uint32(n), nil
}

// checkPortName reports whether s can be a container port name (IANA_SVC_NAME: at most 15
// lower-case letters, digits and '-', at least one letter, no '-' at either end or twice).
func checkPortName(s string) error {
	if len(s) > 15 {
		return fmt.Errorf("%s is neither a port number nor a port name (at most 15 characters)", quote.Prefix(s, 64))
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			letter = true
		case c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1 && s[i-1] != '-':
		default:
			return fmt.Errorf("%s is neither a port number, a range lo-hi, nor a port name", quote.Prefix(s, 64))
		}
	}
	if !letter {
		return fmt.Errorf("%s is neither a port number nor a port name (no letter)", quote.Prefix(s, 64))
	}
	return nil
}

// listHas reports whether the port-list annotation value s holds port p, skipping bad items
// (as Linkerd does). Names are resolved with named, which may be nil (names never match). It
// does not allocate.
func listHas(s string, p uint32, named func(name string, p uint32) bool) bool {
	for s != "" {
		var item string
		item, s, _ = strings.Cut(s, ",")
		r, name, err := parsePortItem(strings.TrimSpace(item))
		switch {
		case err != nil:
			continue
		case name != "":
			if named != nil && named(name, p) {
				return true
			}
		case r.Contains(p):
			return true
		}
	}
	return false
}

// podPortNamed reports whether one of pod's containers (or init containers, where native
// sidecars run) has a port named name numbered p.
func podPortNamed(pod *Pod) func(string, uint32) bool {
	return func(name string, p uint32) bool { return hasNamedPort(pod, name, p) }
}

func hasNamedPort(pod *Pod, name string, p uint32) bool {
	for _, cp := range pod.ports {
		if cp.Port >= 0 && uint32(cp.Port) == p && cp.Name() == name {
			return true
		}
	}
	return false
}

// IsOpaque reports whether port of pod is opaque: listed in the pod's
// config.linkerd.io/opaque-ports annotation (numbers, ranges, or names of the pod's container
// ports) when the pod has one (an empty value means no opaque ports), else in
// cfg.DefaultOpaquePorts. A nil pod uses the defaults.
func IsOpaque(cfg Config, pod *Pod, port uint32) bool {
	if pod != nil {
		if v, ok := pod.annotations.Get(AnnotationOpaquePorts); ok {
			return listHas(v, port, podPortNamed(pod))
		}
	}
	for _, p := range cfg.DefaultOpaquePorts {
		if p == port {
			return true
		}
	}
	return false
}

// IsSkippedInbound reports whether port is in the pod's config.linkerd.io/skip-inbound-ports
// annotation (numbers and ranges), so that traffic to it bypasses the pod's proxy.
func IsSkippedInbound(pod *Pod, port uint32) bool {
	if pod == nil {
		return false
	}
	v, ok := pod.annotations.Get(AnnotationSkipInboundPorts)
	return ok && listHas(v, port, nil)
}

// IsOpaqueService reports whether port of svc is opaque for GetProfile's opaque_protocol: in
// the Service's config.linkerd.io/opaque-ports annotation (numbers, ranges, or names of its
// own ports) when it has one (an empty value means none), else in cfg.DefaultOpaquePorts, as
// Linkerd's opaque-ports watcher does. A nil svc uses the defaults.
func IsOpaqueService(cfg Config, svc *corev1.Service, port uint32) bool {
	if svc != nil {
		if v, ok := svc.Annotations[AnnotationOpaquePorts]; ok {
			return listHas(v, port, func(name string, p uint32) bool {
				for i := range svc.Spec.Ports {
					if sp := &svc.Spec.Ports[i]; sp.Name == name && sp.Port >= 0 && uint32(sp.Port) == p {
						return true
					}
				}
				return false
			})
		}
	}
	for _, p := range cfg.DefaultOpaquePorts {
		if p == port {
			return true
		}
	}
	return false
}
