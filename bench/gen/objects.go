package gen

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Ports of every generated Service.
const (
	ServicePort  = 80
	TargetPort   = 8080
	PortName     = "http"
	labelApp     = "app"
	labelCPNS    = "linkerd.io/control-plane-ns"
	labelPTH     = "pod-template-hash"
	hashLen      = 10
	hashAlphabet = "bcdfghjklmnpqrstvwxz2456789" // Kubernetes' SafeEncodeString alphabet
)

var zones = [...]string{"zone-a", "zone-b", "zone-c"}

// ServiceName returns the name of service i.
func ServiceName(i int) string { return "svc-" + strconv.Itoa(i) }

// Namespace returns the namespace of service i.
func (c Config) Namespace(i int) string { return "ns-" + strconv.Itoa(i%c.Namespaces) }

// Authority returns the Get/GetProfile path of service i's port.
func (c Config) Authority(i int, clusterDomain string) string {
	return ServiceName(i) + "." + c.Namespace(i) + ".svc." + clusterDomain + ":" + strconv.Itoa(ServicePort)
}

func (c Config) hash(s string) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], c.Seed)
	d := xxhash.New()
	_, _ = d.Write(b[:])
	_, _ = d.WriteString(s)
	return d.Sum64()
}

// TemplateHash returns the pod-template-hash of the deployment behind a service.
func (c Config) TemplateHash(deployment string) string {
	h := c.hash("template/" + deployment)
	var b [hashLen]byte
	for i := range b {
		b[i] = hashAlphabet[h%uint64(len(hashAlphabet))]
		h /= uint64(len(hashAlphabet))
	}
	return string(b[:])
}

// Meshed reports whether the pod named name is meshed (a hash of the name against
// MeshedShare).
func (c Config) Meshed(podName string) bool {
	if c.MeshedShare >= 1 {
		return true
	}
	return float64(c.hash("meshed/"+podName)>>11)/(1<<53) < c.MeshedShare
}

// PodName returns the name of the pod with serial s behind service i.
func (c Config) PodName(i int, s uint32) string {
	d := ServiceName(i)
	return d + "-" + c.TemplateHash(d) + "-" + strconv.FormatUint(uint64(s), 10)
}

// SerialAddr returns the IP of the pod with serial s: 10.0.0.0/8 with s as the low 24 bits.
func SerialAddr(s uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(s >> 16), byte(s >> 8), byte(s)})
}

// AddrSerial is the inverse of SerialAddr.
func AddrSerial(a netip.Addr) (uint32, bool) {
	if !a.Is4() {
		return 0, false
	}
	b := a.As4()
	if b[0] != 10 {
		return 0, false
	}
	s := uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return s, s != 0
}

// parsePodName splits "<deployment>-<hash>-<serial>"; ok is false for any other name.
func parsePodName(name string) (deployment, hash string, serial uint32, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return "", "", 0, false
	}
	num := name[i+1:]
	if num == "" || len(num) > 8 || num[0] == '0' {
		return "", "", 0, false
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil || n == 0 || n > MaxSerial {
		return "", "", 0, false
	}
	rest := name[:i]
	j := strings.LastIndexByte(rest, '-')
	if j <= 0 || len(rest)-j-1 != hashLen {
		return "", "", 0, false
	}
	return rest[:j], rest[j+1:], uint32(n), true
}

// nodeNames are the nodes pods run on: pod serial s on nodeNames[s%64].
var nodeNames = func() (n [64]string) {
	for i := range n {
		n[i] = "node-" + strconv.Itoa(i)
	}
	return n
}()

// NodeName returns the node the pod of serial s runs on.
func NodeName(serial uint32) string { return nodeNames[serial%uint32(len(nodeNames))] }

// ParsePodName returns the deployment and serial of the pod named name, or false when the
// name is not one this package generates for c (or the hash in it does not match), as Pod
// decides.
func (c Config) ParsePodName(name string) (deployment string, serial uint32, ok bool) {
	dep, hash, serial, ok := parsePodName(name)
	if !ok || hash != c.TemplateHash(dep) {
		return "", 0, false
	}
	return dep, serial, true
}

// Pod synthesizes the pod named name in namespace ns from its name alone, or returns nil when
// the name is not one this package generates (or the hash in it does not match). It
// allocates a new Pod on every call; callers may keep it.
func Pod(c Config, ns, name string) *corev1.Pod {
	dep, hash, serial, ok := parsePodName(name)
	if !ok || hash != c.TemplateHash(dep) {
		return nil
	}
	ip := SerialAddr(serial).String()
	labels := map[string]string{labelApp: dep, labelPTH: hash}
	if c.Meshed(name) {
		labels[labelCPNS] = c.ControlPlaneNamespace
	}
	yes := true
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: dep + "-" + hash, Controller: &yes,
			}},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: dep,
			NodeName:           NodeName(serial),
			Containers:         []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{Name: PortName, ContainerPort: TargetPort, Protocol: corev1.ProtocolTCP}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

// Service synthesizes service i.
func (c Config) Service(i int) *corev1.Service {
	name := ServiceName(i)
	var ip [16]byte
	ip[0], ip[1], ip[2], ip[3] = 0xfd, 0x00, 0x00, 0x96
	binary.BigEndian.PutUint64(ip[8:], uint64(i)+1)
	cip := netip.AddrFrom16(ip).String()
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace(i), Name: name, Labels: map[string]string{labelApp: name}},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  cip,
			ClusterIPs: []string{cip},
			Selector:   map[string]string{labelApp: name},
			Ports: []corev1.ServicePort{{
				Name: PortName, Protocol: corev1.ProtocolTCP, Port: ServicePort, TargetPort: intstr.FromInt32(TargetPort),
			}},
		},
	}
}

// SliceName returns the name of slice k of service i.
func SliceName(i, k int) string { return ServiceName(i) + "-" + strconv.Itoa(k) }

// EndpointSlice synthesizes slice k of service i holding eps.
func (c Config) EndpointSlice(i, k int, eps []Endpoint) *discoveryv1.EndpointSlice {
	ns, svc := c.Namespace(i), ServiceName(i)
	name, proto, port := PortName, corev1.ProtocolTCP, int32(TargetPort)
	out := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      SliceName(i, k),
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc,
				discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		Endpoints:   make([]discoveryv1.Endpoint, len(eps)),
	}
	ready, zs := [2]bool{false, true}, zones // per slice, so no two objects share them
	for j, e := range eps {
		node := NodeName(e.Serial)
		out.Endpoints[j] = discoveryv1.Endpoint{
			Addresses:  []string{SerialAddr(e.Serial).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready[b2i(e.Ready)], Serving: &ready[1], Terminating: &ready[0]},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: c.PodName(i, e.Serial)},
			NodeName:   &node,
			Zone:       &zs[e.Serial%uint32(len(zs))],
		}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
