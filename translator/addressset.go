package translator

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/meridian-mesh/meridian/snapshot"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// DefaultWeight is the weight of every address, as in Linkerd.
const DefaultWeight = 10000

// Metric label keys.
const (
	LabelKeyService        = "service"
	LabelKeyNamespace      = "namespace"
	LabelKeyPod            = snapshot.LabelPod // an endpoint's Pod, not among its Labels
	LabelKeyServiceAccount = "serviceaccount"
	LabelKeyControlPlaneNS = "control_plane_ns"
	LabelKeyZone           = "zone"
	LabelKeyZoneLocality   = "zone_locality"
	LabelKeyPodTemplate    = "pod_template_hash"
)

// The values of the zone_locality label: the endpoint is in the client's zone, in another,
// or one of the two zones is unknown (every endpoint of a set, until View knows the client's).
const (
	ZoneLocal   = "local"
	ZoneRemote  = "remote"
	ZoneUnknown = "unknown"
)

// PodLookup returns the pod named ns/name, or nil when it is unknown. It must be cheap (an
// index lookup): AddressSet calls it once per endpoint. The pod must not be modified.
type PodLookup func(ns, name string) *Pod

// IsExternalName reports whether svc is an ExternalName Service, which has no endpoints and
// which Get refuses (InvalidArgument).
func IsExternalName(svc *corev1.Service) bool {
	return svc != nil && svc.Spec.Type == corev1.ServiceTypeExternalName
}

// Inputs are what the address set of a service port is computed from.
type Inputs struct {
	// Service is the Service (nil: it does not exist).
	Service *corev1.Service
	// Slices are its EndpointSlices' projections (others are ignored).
	Slices []*EndpointSlice
	// Pods looks up the pods behind the endpoints.
	Pods PodLookup
	// Servers are the policy Servers of the Service's namespace (others have no effect); a
	// Server with proxyProtocol opaque makes the ports it selects opaque.
	Servers []*Server
}

// AddressSet computes the address set that Get serves for port of svc, from the Service's
// EndpointSlices (their projections, SlimEndpointSlice) and the pods behind them. port is the
// Service port the client asked for. A nil svc gives a set with Exists false. See
// HostAddressSet for the rules.
func AddressSet(cfg Config, svc *corev1.Service, port uint32, slices []*EndpointSlice, pods PodLookup) *snapshot.AddressSet {
	return hostAddressSet(cfg, Inputs{Service: svc, Slices: slices, Pods: pods}, port, "", nil)
}

// Reuse lets AddressSetReusing take endpoints over from the set computed before for the same
// Service, port and Config, instead of translating them again.
type Reuse struct {
	// Prev is the earlier set (nil: nothing to reuse).
	Prev *snapshot.AddressSet
	// Stale reports whether the pod ns/name may have changed since Prev was computed; its
	// endpoints are translated again. Nil means no pod changed.
	Stale func(ns, name string) bool
}

// AddressSetReusing is AddressSet of in, except that an endpoint of r.Prev is taken over (the
// same pointer) when the slices still have it at the same address with the same pod
// reference, hostname, zone and zone hints (and, without a pod, the same mirror annotations),
// and its pod is not stale: everything it holds is derived from those, the Service port, the
// Servers and the Config. A change to one endpoint of a large service therefore costs one pod
// lookup and one translation, not one per endpoint. The result is the one AddressSet gives
// for the same inputs, provided r.Prev was computed from the same Service, Servers and Config
// and r.Stale names every pod changed since.
//
// An earlier set that left addresses out for want of their pods (Unresolved) is not reused:
// those pods arrive a few at a time (a source that reads pods after the slices naming them),
// and reusing would carve each arrival's few endpoints from an array of their own, sized for
// all the addresses still missing and pinned by the few. Computed afresh, the set is one
// exact allocation, at the cost of translating every endpoint again once per arrival.
func AddressSetReusing(cfg Config, in Inputs, port uint32, r Reuse) *snapshot.AddressSet {
	if r.Prev == nil || !r.Prev.Exists || r.Prev.Unresolved > 0 {
		return hostAddressSet(cfg, in, port, "", nil)
	}
	return hostAddressSet(cfg, in, port, "", &r)
}

// HostAddressSet is AddressSet restricted, when hostname is not empty, to the endpoints with
// that hostname (Get for <hostname>.<service>.<namespace>.svc.<cluster-domain>).
//
// The rules, Linkerd's, stated of the EndpointSlices the projections are made from:
//   - Only slices labelled kubernetes.io/service-name=svc.Name in svc's namespace count, and of
//     those only address types IPv4 and IPv6 (not FQDN), with addresses of that family.
//   - Port: if svc has a port numbered port, the endpoint port is the slice port with the same
//     name (so named target ports resolve per slice; a slice without it contributes nothing);
//     otherwise every endpoint gets port itself. A slice with no ports contributes nothing.
//   - Only ready endpoints (conditions.ready unset counts as ready).
//   - An endpoint whose targetRef is a Pod that pods does not know is left out; an endpoint
//     without a Pod targetRef is kept, unmeshed and without pod labels.
//   - A pod is meshed when its label linkerd.io/control-plane-ns equals
//     cfg.ControlPlaneNamespace. A meshed pod's address on a port not in its
//     config.linkerd.io/skip-inbound-ports gets the identity of its service account, HTTP/2
//     client parameters and the hint h2, or opaque with the pod's proxy's inbound port
//     (Pod.InboundPort, else cfg.InboundProxyPort) as the opaque-transport port when the
//     port is opaque (IsOpaque). Other addresses get none.
//   - A Server of the namespace with proxyProtocol opaque that selects the pod and the port
//     (ServerOpaque) makes the port opaque too.
//   - An endpoint without a pod in a multicluster mirror's slice gets the gateway identity of
//     the slice's mirror.linkerd.io/remote-gateway-identity annotation (with h2 and HTTP/2
//     client parameters) and, from mirror.linkerd.io/remote-svc-fq-name, the remote service
//     with port as its authority override; the set gets target_cluster, target_service and
//     target_service_namespace from the mirror's cluster label (mirrorEndpoint).
//   - Labels: the set has namespace and service; an address has pod, its owner kind (Owner),
//     serviceaccount, control_plane_ns (meshed pods only), pod_template_hash and zone when
//     known, and zone_locality "unknown" (View sets it against the client's zone), sorted by
//     key. Weight is DefaultWeight. Hostname is the endpoint's hostname, NodeName its pod's
//     node, ForZones its slice's zone hints. The set records the Service's
//     internalTrafficPolicy Local (LocalTrafficPolicy), which View applies.
//   - An address found in several slices is taken from the slice with the smallest name, so
//     the result does not depend on the order of slices.
//
// The result shares no memory with the inputs except strings, and nothing in it is modified
// afterwards. Its endpoints (and their label slices) are carved from a few shared arrays, so
// a pointer to one endpoint keeps those arrays alive; the cost for n addresses is about a
// dozen allocations.
func HostAddressSet(cfg Config, svc *corev1.Service, port uint32, hostname string, slices []*EndpointSlice, pods PodLookup) *snapshot.AddressSet {
	return hostAddressSet(cfg, Inputs{Service: svc, Slices: slices, Pods: pods}, port, hostname, nil)
}

func hostAddressSet(cfg Config, in Inputs, port uint32, hostname string, reuse *Reuse) *snapshot.AddressSet {
	svc, slices := in.Service, in.Slices
	if svc == nil {
		return &snapshot.AddressSet{Exists: false}
	}
	set := &snapshot.AddressSet{
		Exists:             true,
		Labels:             []snapshot.Label{{Key: LabelKeyNamespace, Value: svc.Namespace}, {Key: LabelKeyService, Value: svc.Name}},
		LocalTrafficPolicy: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal,
	}
	spName, named := servicePortName(svc, port)
	tc := templateContext{cfg: cfg, port: port, pods: in.Pods, servers: in.Servers}

	// Keep the slices of this Service that have the port, ordered by name, and count their
	// ready addresses.
	own := make([]*EndpointSlice, 0, len(slices))
	var b batch
	nAddrs := 0
	for _, es := range slices {
		if !sliceOf(es, svc) {
			continue
		}
		if _, ok := slicePort(es, port, spName, named); !ok {
			continue
		}
		own = append(own, es)
		for i := range es.Endpoints {
			ep := &es.Endpoints[i]
			nAddrs += ep.Addrs()
		}
	}
	sortSlices(own)
	if ml := mirrorSetLabels(own); ml != nil {
		set.Labels = sortedLabels(append(set.Labels, ml...))
	}
	set.Endpoints = make([]*snapshot.Endpoint, 0, nAddrs)
	switch {
	case reuse == nil:
		// Every endpoint is new: one exact allocation.
		b.endpoints = make([]snapshot.Endpoint, 0, nAddrs)
	case nAddrs > reuse.Prev.Len():
		// At least the addresses beyond the earlier set's are new (a Service's first slices
		// arriving after it, a scale-up): one allocation for them. Beyond those, the batch
		// grows by doubling, as when few are new.
		b.endpoints = make([]snapshot.Endpoint, 0, nAddrs-reuse.Prev.Len())
	}

	for _, es := range own {
		tp, _ := slicePort(es, port, spName, named)
		for i := range es.Endpoints {
			ep := &es.Endpoints[i]
			if hostname != "" && ep.Hostname() != hostname {
				continue
			}
			var tmpl snapshot.Endpoint
			translated, ok := false, true
			for j := range ep.Addrs() {
				ap := netip.AddrPortFrom(ep.AddrAt(es, j), uint16(tp))
				if old := reuse.take(es, ep, ap, port); old != nil {
					set.Endpoints = append(set.Endpoints, old)
					continue
				}
				if !translated {
					translated = true
					tmpl, ok = tc.endpointTemplate(es, ep, tp, &b)
				}
				if !ok {
					set.Unresolved += int32(ep.Addrs() - j)
					break // its pod is unknown: every address of it is left out
				}
				e := b.endpoint()
				*e = tmpl
				e.Addr = ap
				set.Endpoints = append(set.Endpoints, e)
			}
		}
	}
	// In address order; of an address in several slices, the first (the smallest slice
	// name) stays.
	set.Endpoints = snapshot.SortEndpoints(set.Endpoints)
	return set
}

// take returns the endpoint of the previous set at ap when it may be taken over for ep of es
// (see AddressSetReusing), or nil. A nil r takes nothing.
func (r *Reuse) take(es *EndpointSlice, ep *SliceEndpoint, ap netip.AddrPort, port uint32) *snapshot.Endpoint {
	if r == nil {
		return nil
	}
	old := r.Prev.Lookup(ap)
	if old == nil {
		return nil
	}
	if old.Hostname() != ep.Hostname() || old.Label(LabelKeyZone) != ep.ZoneName() || !slices.Equal(old.ForZones(), ep.ForZones()) {
		return nil
	}
	if ep.Pod == "" {
		if old.PodName() != "" {
			return nil
		}
		var m snapshot.Endpoint
		override := mirrorEndpoint(&m, es, port)
		if m.ID != old.ID || override != old.AuthorityOverride() {
			return nil
		}
		return old
	}
	ns := ep.PodNamespace(es)
	if p := old.PodRef(); p.Name == "" || p.Name != ep.Pod || p.Namespace != ns {
		return nil
	}
	if r.Stale != nil && r.Stale(ns, ep.Pod) {
		return nil
	}
	return old
}

// servicePortName returns the name of svc's port numbered port (preferring TCP), and whether
// there is one.
func servicePortName(svc *corev1.Service, port uint32) (string, bool) {
	found, name := false, ""
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if sp.Port < 0 || uint32(sp.Port) != port {
			continue
		}
		if sp.Protocol == "" || sp.Protocol == corev1.ProtocolTCP {
			return sp.Name, true
		}
		if !found {
			found, name = true, sp.Name
		}
	}
	return name, found
}

func sliceOf(es *EndpointSlice, svc *corev1.Service) bool {
	return es != nil && es.Namespace == svc.Namespace && es.Service == svc.Name &&
		(es.AddressType == discoveryv1.AddressTypeIPv4 || es.AddressType == discoveryv1.AddressTypeIPv6)
}

func sortSlices(s []*EndpointSlice) {
	if !slices.IsSortedFunc(s, compareSlices) {
		slices.SortStableFunc(s, compareSlices)
	}
}

func compareSlices(a, b *EndpointSlice) int { return cmp.Compare(a.Name, b.Name) }

// slicePort returns the endpoint port of es for the requested port: the port of the slice
// port named spName when the Service has the port (named), else port itself. A slice with no
// ports contributes nothing; so does a named port without a number ("all ports").
func slicePort(es *EndpointSlice, port uint32, spName string, named bool) (uint32, bool) {
	if len(es.Ports) == 0 {
		return 0, false
	}
	if !named {
		return port, port >= 1 && port <= 65535
	}
	for i := range es.Ports {
		p := &es.Ports[i]
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != spName {
			continue
		}
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			return 0, false
		}
		return uint32(*p.Port), true
	}
	return 0, false
}

// parseAddr parses an endpoint address of the slice's family.
func parseAddr(s string, t discoveryv1.AddressType) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	switch t {
	case discoveryv1.AddressTypeIPv4:
		return a, a.Is4()
	case discoveryv1.AddressTypeIPv6:
		return a, a.Is6()
	}
	return netip.Addr{}, false
}

// templateContext is what endpointTemplate reads besides the endpoint.
type templateContext struct {
	cfg     Config
	port    uint32 // the Service port asked for
	pods    PodLookup
	servers []*Server
}

// endpointTemplate returns everything of the endpoint ep on port tp but its address, or false
// when ep is left out (its pod is unknown).
func (tc *templateContext) endpointTemplate(es *EndpointSlice, ep *SliceEndpoint, tp uint32, b *batch) (snapshot.Endpoint, bool) {
	cfg := tc.cfg
	e := snapshot.Endpoint{Weight: DefaultWeight}
	zone := ep.ZoneName()
	if ep.Pod == "" {
		e.Labels = b.podlessLabels(zone)
		e.Rare = b.rare(ep.Hostname(), ep.ForZones(), mirrorEndpoint(&e, es, tc.port))
		return e, true
	}
	e.Rare = b.rare(ep.Hostname(), ep.ForZones(), "")
	ns := ep.PodNamespace(es)
	var pod *Pod
	if tc.pods != nil {
		pod = tc.pods(ns, ep.Pod)
	}
	if pod == nil {
		return e, false
	}
	if pns := pod.Namespace(); pns != "" {
		ns = pns
	}
	name := pod.Name
	if name == "" {
		name = ep.Pod
	}
	b.setPod(&e, name, ns, pod.NodeName())
	e.Labels = podLabels(cfg, pod, zone, b)
	opaque := IsOpaque(cfg, pod, tp) || ServerOpaque(tc.servers, pod, tp)
	setMeshed(cfg, &e, pod, tp, opaque, b)
	return e, true
}

// podLabels returns the metric labels of an address of pod in zone ("": unknown) but its pod
// label (the endpoint's Pod), in key order, the owner's slotted in where it sorts, with
// zone_locality unknown: interned (internLabels), so that the addresses of the pods of one
// workload in one zone share them.
func podLabels(cfg Config, pod *Pod, zone string, b *batch) []snapshot.Label {
	k := podLabelKey{meshed: isMeshed(cfg, pod), hash: pod.Label(LabelPodTemplateHash), sa: serviceAccount(pod), zone: zone}
	if kind, oname := Owner(pod); kind != "" && !reservedLabel(kind) {
		k.ownerKind, k.ownerName = kind, oname
	}
	return b.podLabels(k, func() []snapshot.Label { return buildPodLabels(cfg, k, b) })
}

// podLabelKey is what the labels of a pod's address depend on (with the Config).
type podLabelKey struct {
	meshed                               bool
	hash, sa, zone, ownerKind, ownerName string
}

// buildPodLabels builds the labels podLabels returns.
func buildPodLabels(cfg Config, k podLabelKey, b *batch) []snapshot.Label {
	owner := snapshot.Label{Key: k.ownerKind, Value: k.ownerName}
	labels := b.scratch[:0]
	add := func(l snapshot.Label) {
		if owner.Key != "" && owner.Key < l.Key {
			labels = append(labels, owner)
			owner.Key = ""
		}
		labels = append(labels, l)
	}
	if k.meshed {
		add(snapshot.Label{Key: LabelKeyControlPlaneNS, Value: cfg.ControlPlaneNamespace})
	}
	if k.hash != "" {
		add(snapshot.Label{Key: LabelKeyPodTemplate, Value: k.hash})
	}
	add(snapshot.Label{Key: LabelKeyServiceAccount, Value: k.sa})
	if k.zone != "" {
		add(snapshot.Label{Key: LabelKeyZone, Value: k.zone})
	}
	add(snapshot.Label{Key: LabelKeyZoneLocality, Value: ZoneUnknown})
	if owner.Key != "" {
		labels = append(labels, owner)
	}
	b.scratch = labels
	return internLabels(labels)
}

// serviceAccount is pod's service account ("default" when unset, as the API server fills in).
func serviceAccount(pod *Pod) string {
	if sa := pod.ServiceAccountName(); sa != "" {
		return sa
	}
	return "default"
}

// isMeshed reports whether pod is meshed by this control plane.
func isMeshed(cfg Config, pod *Pod) bool {
	return cfg.ControlPlaneNamespace != "" && pod.Label(LabelControlPlaneNS) == cfg.ControlPlaneNamespace
}

// setMeshed gives e, an address of pod on port tp, what a meshed pod's address gets: identity,
// HTTP/2 client parameters and the protocol hint (opaque, with the opaque-transport port, when
// the port is opaque: the pod's proxy's inbound port, else the configured one). An unmeshed
// pod, or a port that skips the inbound proxy, gets none.
func setMeshed(cfg Config, e *snapshot.Endpoint, pod *Pod, tp uint32, opaque bool, b *batch) {
	if !isMeshed(cfg, pod) || IsSkippedInbound(pod, tp) {
		return
	}
	e.ID = b.identity(cfg, serviceAccount(pod), e.PodNamespace())
	e.HTTP2 = true
	e.Hint = snapshot.HintH2
	inbound := cfg.InboundProxyPort
	if p := pod.InboundPort(); p != 0 {
		inbound = p // the pod's proxy listens elsewhere (config.linkerd.io/proxy-inbound-port)
	}
	if opaque {
		e.Hint = snapshot.HintOpaque
		e.OpaqueTransportPort = inbound
	} else if cfg.OutboundTransportMode == TransportHeader {
		e.OpaqueTransportPort = inbound
	}
}

// sortedLabels sorts ls by key (a few labels: insertion sort, in place) and returns it.
func sortedLabels(ls []snapshot.Label) []snapshot.Label {
	slices.SortStableFunc(ls, func(a, b snapshot.Label) int { return cmp.Compare(a.Key, b.Key) })
	return ls
}

// reservedLabel reports whether an owner kind would collide with another address label.
func reservedLabel(k string) bool {
	switch k {
	case LabelKeyPod, LabelKeyServiceAccount, LabelKeyControlPlaneNS, LabelKeyZone, LabelKeyZoneLocality, LabelKeyPodTemplate,
		LabelKeyService, LabelKeyNamespace:
		return true
	}
	return false
}
