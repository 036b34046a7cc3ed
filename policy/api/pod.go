package api

import (
	"slices"
	"strings"

	"github.com/meridian-mesh/meridian/policy/compute"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The pod annotations the policy controller reads (Linkerd's names).
const (
	AnnotationDefaultInboundPolicy = "config.linkerd.io/default-inbound-policy"
	AnnotationOpaquePorts          = "config.linkerd.io/opaque-ports"
	AnnotationRequireIdentityPorts = "config.linkerd.io/proxy-require-identity-inbound-ports"
)

// ConvertPod extracts what policy needs from a pod: labels, the policy annotations, the named
// TCP container ports and the HTTP probe paths per port (of containers and init containers,
// which include native sidecars). Invalid annotation values are described in the returned
// warnings and ignored, as Linkerd does, but for those that fail closed, since a typo must
// not open the pod: default-inbound-policy (deny, as the injector writes it for the proxy)
// and proxy-require-identity-inbound-ports (every port).
func ConvertPod(p *corev1.Pod) (*compute.Pod, []string) {
	out := &compute.Pod{
		Namespace: p.Namespace, Name: p.Name, Labels: p.Labels,
		PortNames: map[string][]uint32{},
		Probes:    map[uint32][]string{},
	}
	var warnings []string
	if v, ok := p.Annotations[AnnotationDefaultInboundPolicy]; ok {
		// Trimmed, as the injector reads it for the proxy's environment: the two must agree.
		dp, err := compute.ParseDefaultPolicy(strings.TrimSpace(v))
		if err != nil {
			// Fails closed, as the injector does for the proxy's environment: a value that
			// does not parse ("Deny") must not leave the pod on the wider cluster default.
			dp = compute.Deny
			warnings = append(warnings, AnnotationDefaultInboundPolicy+": "+err.Error()+"; the pod denies by default")
		}
		out.DefaultPolicy = &dp
	}
	portSet := func(ann, instead string) (compute.PortSet, bool) {
		v, ok := p.Annotations[ann]
		if !ok {
			return nil, true
		}
		s, err := compute.ParsePortSet(v)
		if err != nil {
			warnings = append(warnings, ann+": "+err.Error()+"; "+instead)
		}
		return s, err == nil
	}
	out.OpaquePorts, _ = portSet(AnnotationOpaquePorts, "ignored")
	// Fails closed too: which ports were meant to require identity is not known, so all do
	// (probe paths stay reachable, as on any port).
	var ok bool
	out.RequireIDPorts, ok = portSet(AnnotationRequireIdentityPorts, "every port of the pod requires identity")
	out.RequireIDAll = !ok

	for _, c := range slices.Concat(p.Spec.Containers, p.Spec.InitContainers) {
		for _, cp := range c.Ports {
			if port, ok := tcpPort(cp); ok && cp.Name != "" {
				if !slices.Contains(out.PortNames[cp.Name], port) {
					out.PortNames[cp.Name] = append(out.PortNames[cp.Name], port)
				}
			}
		}
		for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if probe == nil || probe.HTTPGet == nil {
				continue
			}
			port, ok := probePort(probe.HTTPGet.Port, c.Ports)
			if !ok {
				continue
			}
			path := probePath(probe.HTTPGet.Path)
			if !slices.Contains(out.Probes[port], path) {
				out.Probes[port] = append(out.Probes[port], path)
			}
		}
	}
	for _, paths := range out.Probes {
		slices.Sort(paths)
	}
	for _, ports := range out.PortNames {
		slices.Sort(ports)
	}
	return out, warnings
}

func tcpPort(cp corev1.ContainerPort) (uint32, bool) {
	if cp.Protocol != "" && !strings.EqualFold(string(cp.Protocol), "TCP") {
		return 0, false
	}
	if cp.ContainerPort < 1 || cp.ContainerPort > 65535 {
		return 0, false
	}
	return uint32(cp.ContainerPort), true
}

// probePort resolves a probe's port: a number, or a named TCP port of the same container.
func probePort(p intstr.IntOrString, ports []corev1.ContainerPort) (uint32, bool) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, false
		}
		return uint32(p.IntVal), true
	}
	for _, cp := range ports {
		if n, ok := tcpPort(cp); ok && strings.EqualFold(cp.Name, p.StrVal) {
			return n, true
		}
	}
	return 0, false
}

// probePath is the path part of a probe's path (query and fragment dropped, "/" when empty),
// which is what kubelet requests and what the probe route matches exactly.
func probePath(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}
