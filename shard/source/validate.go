package source

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The Dir source validates what it reads enough that the objects it delivers are ones the
// API server would have accepted in the fields Meridian reads (names, ports, addresses,
// labels), and applies the API server's defaults for those fields, so that a consumer sees
// the same shape from both sources. It is not a full re-implementation of API validation.

// fieldError is one problem at a field path such as "spec.ports[0].port".
type fieldError struct {
	path string
	msg  string
}

type problems []fieldError

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, fieldError{path: path, msg: fmt.Sprintf(format, args...)})
}

// addAll records the messages of an apimachinery validation function, if any.
func (p *problems) addAll(path, value string, msgs []string) {
	if len(msgs) > 0 {
		p.add(path, "%q is invalid: %s", value, strings.Join(msgs, "; "))
	}
}

func defaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0 {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Spec.ClusterIP != "" && len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
	}
}

func defaultPod(p *corev1.Pod) {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			for j := range cs[i].Ports {
				if cs[i].Ports[j].Protocol == "" {
					cs[i].Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	}
	if p.Status.PodIP != "" && len(p.Status.PodIPs) == 0 {
		p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	if p.Status.PodIP == "" && len(p.Status.PodIPs) > 0 {
		p.Status.PodIP = p.Status.PodIPs[0].IP
	}
	if p.Status.HostIP != "" && len(p.Status.HostIPs) == 0 {
		p.Status.HostIPs = []corev1.HostIP{{IP: p.Status.HostIP}}
	}
}

func defaultEndpointSlice(es *discoveryv1.EndpointSlice) {
	for i := range es.Ports {
		p := &es.Ports[i]
		if p.Name == nil {
			empty := ""
			p.Name = &empty
		}
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
	}
}

func validateMeta(p *problems, m *metav1.ObjectMeta, nameCheck func(string) []string, namespaced bool) {
	if m.Name == "" {
		p.add("metadata.name", "is empty")
	} else {
		p.addAll("metadata.name", m.Name, nameCheck(m.Name))
	}
	if namespaced {
		p.addAll("metadata.namespace", m.Namespace, validation.IsDNS1123Label(m.Namespace))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		p.addAll("metadata.labels", k, validation.IsQualifiedName(k))
		p.addAll("metadata.labels", m.Labels[k], validation.IsValidLabelValue(m.Labels[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		p.addAll("metadata.annotations", k, validation.IsQualifiedName(strings.ToLower(k)))
	}
	for i, o := range m.OwnerReferences {
		path := fmt.Sprintf("metadata.ownerReferences[%d]", i)
		if o.Kind == "" {
			p.add(path+".kind", "is empty")
		}
		if o.Name == "" {
			p.add(path+".name", "is empty")
		}
		if o.APIVersion == "" {
			p.add(path+".apiVersion", "is empty")
		}
	}
}

func validateService(s *corev1.Service) []fieldError {
	var p problems
	validateMeta(&p, &s.ObjectMeta, validation.IsDNS1035Label, true)
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	case corev1.ServiceTypeExternalName:
		if s.Spec.ExternalName == "" {
			p.add("spec.externalName", "is empty (required for type ExternalName)")
		} else {
			p.addAll("spec.externalName", s.Spec.ExternalName, validation.IsDNS1123Subdomain(strings.TrimSuffix(s.Spec.ExternalName, ".")))
		}
	default:
		p.add("spec.type", "%q is not one of ClusterIP, NodePort, LoadBalancer, ExternalName", s.Spec.Type)
	}
	for i, ip := range s.Spec.ClusterIPs {
		if ip == corev1.ClusterIPNone {
			if i > 0 || len(s.Spec.ClusterIPs) > 1 {
				p.add(fmt.Sprintf("spec.clusterIPs[%d]", i), `"None" must be the only cluster IP`)
			}
			continue
		}
		if _, err := parseIP(ip); err != nil {
			p.add(fmt.Sprintf("spec.clusterIPs[%d]", i), "%v", err)
		}
	}
	if s.Spec.ClusterIP != "" && len(s.Spec.ClusterIPs) > 0 && s.Spec.ClusterIP != s.Spec.ClusterIPs[0] {
		p.add("spec.clusterIP", "%q differs from spec.clusterIPs[0] %q", s.Spec.ClusterIP, s.Spec.ClusterIPs[0])
	}
	names := map[string]bool{}
	for i, port := range s.Spec.Ports {
		path := fmt.Sprintf("spec.ports[%d]", i)
		if port.Name == "" && len(s.Spec.Ports) > 1 {
			p.add(path+".name", "is empty (required when a Service has several ports)")
		}
		if port.Name != "" {
			p.addAll(path+".name", port.Name, validation.IsDNS1123Label(port.Name))
			if names[port.Name] {
				p.add(path+".name", "%q is used by another port", port.Name)
			}
			names[port.Name] = true
		}
		p.addAll(path+".port", fmt.Sprint(port.Port), validation.IsValidPortNum(int(port.Port)))
		validateProtocol(&p, path+".protocol", port.Protocol)
		switch port.TargetPort.Type {
		case intstr.Int:
			p.addAll(path+".targetPort", fmt.Sprint(port.TargetPort.IntVal), validation.IsValidPortNum(int(port.TargetPort.IntVal)))
		case intstr.String:
			p.addAll(path+".targetPort", port.TargetPort.StrVal, validation.IsValidPortName(port.TargetPort.StrVal))
		}
		if port.NodePort != 0 {
			p.addAll(path+".nodePort", fmt.Sprint(port.NodePort), validation.IsValidPortNum(int(port.NodePort)))
		}
	}
	return p
}

func validatePod(pod *corev1.Pod) []fieldError {
	var p problems
	validateMeta(&p, &pod.ObjectMeta, validation.IsDNS1123Subdomain, true)
	if sa := pod.Spec.ServiceAccountName; sa != "" {
		p.addAll("spec.serviceAccountName", sa, validation.IsDNS1123Subdomain(sa))
	}
	if h := pod.Spec.Hostname; h != "" {
		p.addAll("spec.hostname", h, validation.IsDNS1123Label(h))
	}
	if s := pod.Spec.Subdomain; s != "" {
		p.addAll("spec.subdomain", s, validation.IsDNS1123Label(s))
	}
	for _, group := range []struct {
		path string
		cs   []corev1.Container
	}{{"spec.initContainers", pod.Spec.InitContainers}, {"spec.containers", pod.Spec.Containers}} {
		for i, c := range group.cs {
			path := fmt.Sprintf("%s[%d]", group.path, i)
			if c.Name == "" {
				p.add(path+".name", "is empty")
			}
			for j, port := range c.Ports {
				pp := fmt.Sprintf("%s.ports[%d]", path, j)
				p.addAll(pp+".containerPort", fmt.Sprint(port.ContainerPort), validation.IsValidPortNum(int(port.ContainerPort)))
				if port.Name != "" {
					p.addAll(pp+".name", port.Name, validation.IsValidPortName(port.Name))
				}
				validateProtocol(&p, pp+".protocol", port.Protocol)
			}
		}
	}
	if pod.Status.PodIP != "" {
		if _, err := parseIP(pod.Status.PodIP); err != nil {
			p.add("status.podIP", "%v", err)
		}
	}
	for i, ip := range pod.Status.PodIPs {
		if i == 0 && ip.IP == pod.Status.PodIP {
			continue // checked as status.podIP
		}
		if _, err := parseIP(ip.IP); err != nil {
			p.add(fmt.Sprintf("status.podIPs[%d]", i), "%v", err)
		}
	}
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != pod.Status.PodIP {
		p.add("status.podIPs[0]", "%q differs from status.podIP %q", pod.Status.PodIPs[0].IP, pod.Status.PodIP)
	}
	for i, ip := range pod.Status.HostIPs {
		if _, err := parseIP(ip.IP); err != nil {
			p.add(fmt.Sprintf("status.hostIPs[%d]", i), "%v", err)
		}
	}
	return p
}

func validateEndpointSlice(es *discoveryv1.EndpointSlice) []fieldError {
	var p problems
	validateMeta(&p, &es.ObjectMeta, validation.IsDNS1123Subdomain, true)
	var check func(string) error
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4:
		check = func(s string) error { return checkIP(s, true) }
	case discoveryv1.AddressTypeIPv6:
		check = func(s string) error { return checkIP(s, false) }
	case discoveryv1.AddressTypeFQDN:
		check = func(s string) error {
			if msgs := validation.IsDNS1123Subdomain(s); len(msgs) > 0 {
				return fmt.Errorf("%q is not a DNS name: %s", s, strings.Join(msgs, "; "))
			}
			return nil
		}
	case "":
		p.add("addressType", "is empty (want IPv4, IPv6 or FQDN)")
	default:
		p.add("addressType", "%q is not one of IPv4, IPv6, FQDN", es.AddressType)
	}
	for i, ep := range es.Endpoints {
		path := fmt.Sprintf("endpoints[%d]", i)
		if len(ep.Addresses) == 0 {
			p.add(path+".addresses", "is empty (an endpoint needs one address)")
		}
		if check != nil {
			for j, a := range ep.Addresses {
				if err := check(a); err != nil {
					p.add(fmt.Sprintf("%s.addresses[%d]", path, j), "%v", err)
				}
			}
		}
		if ep.Hostname != nil && *ep.Hostname != "" {
			p.addAll(path+".hostname", *ep.Hostname, validation.IsDNS1123Label(*ep.Hostname))
		}
		if ref := ep.TargetRef; ref != nil {
			if ref.Name == "" {
				p.add(path+".targetRef.name", "is empty")
			}
			if ref.Kind == "Pod" && ref.Namespace != "" && ref.Namespace != es.Namespace {
				p.add(path+".targetRef.namespace", "%q differs from the slice's namespace %q", ref.Namespace, es.Namespace)
			}
		}
	}
	names := map[string]bool{}
	for i, port := range es.Ports {
		path := fmt.Sprintf("ports[%d]", i)
		if port.Port != nil {
			p.addAll(path+".port", fmt.Sprint(*port.Port), validation.IsValidPortNum(int(*port.Port)))
		}
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			p.addAll(path+".name", name, validation.IsDNS1123Label(name))
		}
		if names[name] {
			p.add(path+".name", "%q is used by another port", name)
		}
		names[name] = true
		if port.Protocol != nil {
			validateProtocol(&p, path+".protocol", *port.Protocol)
		}
	}
	return p
}

func validateProtocol(p *problems, path string, proto corev1.Protocol) {
	switch proto {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
	default:
		p.add(path, "%q is not one of TCP, UDP, SCTP", proto)
	}
}

// parseIP accepts an IPv4 or IPv6 address in its usual text form, without a zone.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q has a zone, which Kubernetes addresses cannot have", s)
	}
	return a, nil
}

// checkIP accepts an address of the given family (IPv4-mapped IPv6 counts as IPv6 text
// only when written as IPv6).
func checkIP(s string, v4 bool) error {
	a, err := parseIP(s)
	if err != nil {
		return err
	}
	if v4 && !a.Is4() {
		return fmt.Errorf("%q is not an IPv4 address (addressType is IPv4)", s)
	}
	if !v4 && !a.Is6() {
		return fmt.Errorf("%q is not an IPv6 address (addressType is IPv6)", s)
	}
	return nil
}
