package api

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/serverspec"
	"github.com/meridian-mesh/meridian/policy/compute"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Resource is a converted object: Value is a *compute.Pod, *compute.Server,
// *compute.AuthorizationPolicy, *compute.MeshTLSAuthentication,
// *compute.NetworkAuthentication or *compute.ServerAuthorization, per Kind. Values are new and
// owned by the caller; the index treats them as immutable.
type Resource struct {
	Kind  Kind
	Key   compute.Key
	Value any
	// Warnings are the values conversion ignored, each "field: reason" (the field may be an
	// annotation's key) quoting at most a short prefix: what the object says that has no
	// effect, and what it has instead (a Pod's annotation that does not parse; a Server's
	// accessPolicy none of Linkerd's, which then denies by default). The object is valid
	// without them; a source applies it and shows them to the operator.
	Warnings []string
}

// ErrIgnored wraps conversion errors for objects that are not policy inputs at all (other
// kinds, other groups); callers skip them silently.
type ErrIgnored struct{ APIVersion, Kind string }

func (e *ErrIgnored) Error() string {
	return fmt.Sprintf("%s %s is not a policy input", quote.Message(e.APIVersion), quote.Message(e.Kind))
}

// KindOf returns the indexed kind of an apiVersion/kind pair, or false for anything else
// (including unserved versions of the policy kinds, which Convert rejects).
func KindOf(apiVersion, kind string) (Kind, bool) {
	if apiVersion == "v1" && kind == "Pod" {
		return KindPod, true
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok || group != Group {
		return "", false
	}
	k := Kind(kind)
	if slices.Contains(servedVersions[k], version) {
		return k, true
	}
	return "", false
}

// Convert validates and converts a Pod or policy resource given as an unstructured object.
// Objects of other kinds yield an *ErrIgnored. defaultNamespace fills in a missing
// metadata.namespace (a manifest directory may omit it).
func Convert(u *unstructured.Unstructured, defaultNamespace string) (Resource, error) {
	apiVersion, kind := u.GetAPIVersion(), u.GetKind()
	k, ok := KindOf(apiVersion, kind)
	if !ok {
		if group, _, _ := strings.Cut(apiVersion, "/"); group == Group && Kind(kind) != "" && servedVersions[Kind(kind)] != nil {
			return Resource{}, fmt.Errorf("%s %s: version not served (want one of %s)", quote.Message(apiVersion), kind, strings.Join(servedVersions[Kind(kind)], ", "))
		}
		return Resource{}, &ErrIgnored{APIVersion: apiVersion, Kind: kind}
	}
	ns := u.GetNamespace()
	if ns == "" {
		ns = defaultNamespace
	}
	m := objectMeta{Namespace: ns, Name: u.GetName(), Labels: u.GetLabels(), Annotations: u.GetAnnotations(), Created: u.GetCreationTimestamp()}
	if err := m.validate(); err != nil {
		return Resource{}, fmt.Errorf("%s: %w", kind, err) // err quotes the name; the key is not valid
	}
	var v any
	var warnings []string
	var err error
	switch k {
	case KindPod:
		var pod corev1.Pod
		if err = remarshal(u.Object, &pod); err == nil {
			pod.Namespace = ns
			v, warnings = ConvertPod(&pod)
		}
	case KindServer:
		_, version, _ := strings.Cut(apiVersion, "/")
		v, err = convertSpec(u, m, func(m objectMeta, spec *ServerSpec) (*compute.Server, error) {
			s, warning, err := convertServer(m, version, spec)
			if warning != "" {
				warnings = append(warnings, warning)
			}
			return s, err
		})
	case KindAuthorizationPolicy:
		v, err = convertSpec(u, m, convertAuthorizationPolicy)
	case KindMeshTLSAuthentication:
		v, err = convertSpec(u, m, convertMeshTLSAuthentication)
	case KindNetworkAuthentication:
		v, err = convertSpec(u, m, convertNetworkAuthentication)
	case KindServerAuthorization:
		v, err = convertSpec(u, m, convertServerAuthorization)
	}
	if err != nil {
		return Resource{}, fmt.Errorf("%s %s: %w", kind, m.key(), err)
	}
	return Resource{Kind: k, Key: m.key(), Value: v, Warnings: warnings}, nil
}

// convertSpec decodes u's spec into an S and converts it with convert.
func convertSpec[S, V any](u *unstructured.Unstructured, m objectMeta, convert func(objectMeta, *S) (V, error)) (any, error) {
	var spec S
	if err := decodeSpec(u, &spec); err != nil {
		return nil, err
	}
	return convert(m, &spec)
}

func decodeSpec(u *unstructured.Unstructured, into any) error {
	spec, ok := u.Object["spec"]
	if !ok {
		return fmt.Errorf("spec: required")
	}
	if _, ok := spec.(map[string]any); !ok {
		return fmt.Errorf("spec: must be an object")
	}
	if err := remarshal(spec, into); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	return nil
}

func remarshal(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// objectMeta is the metadata conversion needs.
type objectMeta struct {
	Namespace, Name string
	Labels          map[string]string
	Annotations     map[string]string
	Created         metav1.Time
}

func (m objectMeta) key() compute.Key { return compute.Key{Namespace: m.Namespace, Name: m.Name} }

func (m objectMeta) validate() error {
	if errs := validation.IsDNS1123Label(m.Namespace); len(errs) > 0 {
		return fmt.Errorf("metadata.namespace %s: %s", quote.String(m.Namespace), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(m.Name); len(errs) > 0 {
		return fmt.Errorf("metadata.name %s: %s", quote.String(m.Name), strings.Join(errs, "; "))
	}
	return nil
}

// selector converts a label selector. It is evaluated as Linkerd's policy controller
// evaluates one (k8s/api/src/labels.rs), not as apimachinery validates one: In and NotIn over
// an empty value list match no object and every object, and a key apimachinery would refuse
// is a key no object has. A Server the API server accepted (the CRD checks only the
// operator) then selects the pods Linkerd's would, where refusing it would leave them on the
// default policy. Only an unknown operator is refused.
func selector(field string, s *metav1.LabelSelector) (compute.Selector, error) {
	if err := serverspec.CheckOperators(field, s); err != nil {
		return nil, err
	}
	return labelSelector{match: s.MatchLabels, exprs: s.MatchExpressions}, nil
}

// labelSelector is a label selector with Linkerd's semantics (see selector).
type labelSelector struct {
	match map[string]string
	exprs []metav1.LabelSelectorRequirement
}

// Matches reports whether l has every label of match and meets every expression.
func (s labelSelector) Matches(l labels.Labels) bool {
	for k, v := range s.match {
		if !l.Has(k) || l.Get(k) != v {
			return false
		}
	}
	for _, e := range s.exprs {
		has := l.Has(e.Key)
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if !has || !slices.Contains(e.Values, l.Get(e.Key)) {
				return false
			}
		case metav1.LabelSelectorOpNotIn:
			if has && slices.Contains(e.Values, l.Get(e.Key)) {
				return false
			}
		case metav1.LabelSelectorOpExists:
			if !has {
				return false
			}
		case metav1.LabelSelectorOpDoesNotExist:
			if has {
				return false
			}
		}
	}
	return true
}

var protocols = map[string]compute.Protocol{
	"":        compute.ProtocolDetect,
	"unknown": compute.ProtocolDetect,
	"HTTP/1":  compute.ProtocolHTTP1,
	"HTTP/2":  compute.ProtocolHTTP2,
	"gRPC":    compute.ProtocolGRPC,
	"opaque":  compute.ProtocolOpaque,
	"TLS":     compute.ProtocolTLS,
}

// convertServer converts a Server spec of the given version (v1beta1, v1beta2, v1beta3),
// valid when serverspec.Check says so, as the destination judges it too. An accessPolicy that
// is no default policy (compute.ParseDefaultPolicy) is ignored with a warning: the port then
// has no default authorization, as in Linkerd, never the wider default of a port without a
// Server.
func convertServer(m objectMeta, version string, spec *ServerSpec) (_ *compute.Server, warning string, _ error) {
	if err := serverspec.Check(version, spec); err != nil {
		return nil, "", err
	}
	s := &compute.Server{Namespace: m.Namespace, Name: m.Name, Labels: m.Labels, Created: m.Created.Time}
	var err error
	if spec.PodSelector != nil {
		s.PodSelector, err = selector("spec.podSelector", spec.PodSelector)
	} else {
		s.ExternalWorkloadSelector, err = selector("spec.externalWorkloadSelector", spec.ExternalWorkloadSelector)
	}
	if err != nil {
		return nil, "", err
	}
	if spec.Port.Type == intstr.Int {
		s.Port.Number = uint32(spec.Port.IntVal)
	} else {
		s.Port.Name = spec.Port.StrVal
	}
	s.Protocol = protocols[spec.ProxyProtocol]
	s.AccessPolicy = compute.Deny
	if spec.AccessPolicy != "" {
		p, err := compute.ParseDefaultPolicy(spec.AccessPolicy)
		if err != nil {
			return s, "spec.accessPolicy: " + err.Error() + "; ignored, so the Server denies what none of its authorizations allows", nil
		}
		s.AccessPolicy = p
	}
	return s, "", nil
}

// refIs reports whether a reference's group and kind name the given ones (case-insensitive;
// the core group may be written "" or "core").
func refIs(group, kind, wantGroup, wantKind string) bool {
	if wantGroup == "" && strings.EqualFold(group, "core") {
		group = ""
	}
	return strings.EqualFold(group, wantGroup) && strings.EqualFold(kind, wantKind)
}

func validName(field, name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%s %s: %s", field, quote.String(name), strings.Join(errs, "; "))
	}
	return nil
}

func validNamespace(field, name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%s %s: %s", field, quote.String(name), strings.Join(errs, "; "))
	}
	return nil
}

// convertAuthorizationPolicy validates an AuthorizationPolicy spec.
func convertAuthorizationPolicy(m objectMeta, spec *AuthorizationPolicySpec) (*compute.AuthorizationPolicy, error) {
	ap := &compute.AuthorizationPolicy{Namespace: m.Namespace, Name: m.Name}
	t := spec.TargetRef
	if t == nil {
		return nil, fmt.Errorf("spec.targetRef: required")
	}
	if err := validName("spec.targetRef.name", t.Name); err != nil {
		return nil, err
	}
	ap.TargetName = t.Name
	switch {
	case refIs(t.Group, t.Kind, Group, "Server"):
		ap.Target = compute.TargetServer
	case refIs(t.Group, t.Kind, "", "Namespace"):
		if t.Name != m.Namespace {
			return nil, fmt.Errorf("spec.targetRef: a policy may only target its own namespace %s, not %s", quote.String(m.Namespace), quote.String(t.Name))
		}
		ap.Target = compute.TargetNamespace
	case refIs(t.Group, t.Kind, Group, "HTTPRoute"), refIs(t.Group, t.Kind, "gateway.networking.k8s.io", "HTTPRoute"):
		ap.Target = compute.TargetHTTPRoute
	case refIs(t.Group, t.Kind, "gateway.networking.k8s.io", "GRPCRoute"):
		ap.Target = compute.TargetGRPCRoute
	default:
		return nil, fmt.Errorf("spec.targetRef: unsupported target %s %s (want Server, Namespace, HTTPRoute or GRPCRoute)", groupKind(t.Group, t.Kind), quote.String(t.Name))
	}
	if spec.RequiredAuthenticationRefs == nil {
		return nil, fmt.Errorf("spec.requiredAuthenticationRefs: required")
	}
	for i, r := range spec.RequiredAuthenticationRefs {
		field := fmt.Sprintf("spec.requiredAuthenticationRefs[%d]", i)
		ns, err := refNamespace(field+".namespace", r.Namespace, m.Namespace)
		if err != nil {
			return nil, err
		}
		ref := compute.AuthnRef{Namespace: ns, Name: r.Name}
		if err := validName(field+".name", r.Name); err != nil {
			return nil, err
		}
		switch {
		case refIs(r.Group, r.Kind, Group, "MeshTLSAuthentication"):
			ref.Kind = compute.AuthnMeshTLS
		case refIs(r.Group, r.Kind, Group, "NetworkAuthentication"):
			ref.Kind = compute.AuthnNetwork
		case refIs(r.Group, r.Kind, "", "ServiceAccount"):
			ref.Kind = compute.AuthnServiceAccount
		default:
			return nil, fmt.Errorf("%s: unsupported authentication %s (want MeshTLSAuthentication, NetworkAuthentication or ServiceAccount)", field, groupKind(r.Group, r.Kind))
		}
		ap.Authentications = append(ap.Authentications, ref)
	}
	return ap, nil
}

func groupKind(group, kind string) string {
	if group == "" {
		return quote.Message(kind)
	}
	return quote.Message(kind + "." + group)
}

// identityPattern is the CRD's pattern for identity strings: DNS-like labels, optionally
// starting with a "*" label.
var identityPattern = regexp.MustCompile(`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// validIdentities checks every identity of ids (named field[i]) and returns them.
func validIdentities(field string, ids []string) ([]string, error) {
	var out []string
	for i, id := range ids {
		if err := validIdentity(fmt.Sprintf("%s[%d]", field, i), id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// refNamespace returns the namespace ns of a reference, checked (as field), or def when ns is
// empty.
func refNamespace(field, ns, def string) (string, error) {
	if ns == "" {
		return def, nil
	}
	return ns, validNamespace(field, ns)
}

func validIdentity(field, id string) error {
	if len(id) > 253 || !identityPattern.MatchString(id) {
		return fmt.Errorf("%s %s: not an identity (DNS-like name, optionally starting with \"*.\", or \"*\")", field, quote.String(id))
	}
	return nil
}

// convertMeshTLSAuthentication validates a MeshTLSAuthentication spec.
func convertMeshTLSAuthentication(m objectMeta, spec *MeshTLSAuthenticationSpec) (*compute.MeshTLSAuthentication, error) {
	a := &compute.MeshTLSAuthentication{Namespace: m.Namespace, Name: m.Name}
	if (spec.Identities == nil) == (spec.IdentityRefs == nil) {
		return nil, fmt.Errorf("spec: exactly one of identities and identityRefs is required")
	}
	var err error
	if a.Identities, err = validIdentities("spec.identities", spec.Identities); err != nil {
		return nil, err
	}
	for i, r := range spec.IdentityRefs {
		field := fmt.Sprintf("spec.identityRefs[%d]", i)
		ns, err := refNamespace(field+".namespace", r.Namespace, m.Namespace)
		if err != nil {
			return nil, err
		}
		ref := compute.IdentityRef{Namespace: ns, Name: r.Name}
		switch {
		case refIs(r.Group, r.Kind, "", "ServiceAccount"):
			ref.Kind = compute.IdentityRefServiceAccount
			if err := validName(field+".name", r.Name); err != nil {
				return nil, err
			}
		case refIs(r.Group, r.Kind, "", "Namespace"):
			ref.Kind = compute.IdentityRefNamespace
			if err := validNamespace(field+".name", r.Name); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: unsupported identity reference %s (want ServiceAccount or Namespace)", field, groupKind(r.Group, r.Kind))
		}
		a.IdentityRefs = append(a.IdentityRefs, ref)
	}
	if len(a.Identities)+len(a.IdentityRefs) == 0 {
		return nil, fmt.Errorf("spec: no identities configured")
	}
	return a, nil
}

// parseNet parses a CIDR or a bare address (a /32 or /128), canonicalised.
func parseNet(field, s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%s %s: not a CIDR or IP address", field, quote.String(s))
}

func convertNetworks(field string, in []Network) ([]compute.NetworkMatch, error) {
	var out []compute.NetworkMatch
	for i, n := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		net, err := parseNet(f+".cidr", n.CIDR)
		if err != nil {
			return nil, err
		}
		nm := compute.NetworkMatch{Net: net}
		for j, e := range n.Except {
			ex, err := parseNet(fmt.Sprintf("%s.except[%d]", f, j), e)
			if err != nil {
				return nil, err
			}
			nm.Except = append(nm.Except, ex)
		}
		out = append(out, nm)
	}
	return out, nil
}

// convertNetworkAuthentication validates a NetworkAuthentication spec.
func convertNetworkAuthentication(m objectMeta, spec *NetworkAuthenticationSpec) (*compute.NetworkAuthentication, error) {
	if len(spec.Networks) == 0 {
		return nil, fmt.Errorf("spec.networks: at least one network is required")
	}
	nets, err := convertNetworks("spec.networks", spec.Networks)
	if err != nil {
		return nil, err
	}
	return &compute.NetworkAuthentication{Namespace: m.Namespace, Name: m.Name, Networks: nets}, nil
}

// convertServerAuthorization validates a ServerAuthorization spec.
func convertServerAuthorization(m objectMeta, spec *ServerAuthorizationSpec) (*compute.ServerAuthorization, error) {
	a := &compute.ServerAuthorization{Namespace: m.Namespace, Name: m.Name}
	srv := spec.Server
	switch {
	case (srv.Name == "") == (srv.Selector == nil):
		return nil, fmt.Errorf("spec.server: exactly one of name and selector is required")
	case srv.Name != "":
		if err := validName("spec.server.name", srv.Name); err != nil {
			return nil, err
		}
		a.ServerName = srv.Name
	default:
		sel, err := selector("spec.server.selector", srv.Selector)
		if err != nil {
			return nil, err
		}
		a.ServerSelector = sel
	}
	nets, err := convertNetworks("spec.client.networks", spec.Client.Networks)
	if err != nil {
		return nil, err
	}
	a.Networks = nets
	a.Unauthenticated = spec.Client.Unauthenticated
	if mt := spec.Client.MeshTLS; mt != nil {
		a.UnauthenticatedTLS = mt.UnauthenticatedTLS
		if a.Identities, err = validIdentities("spec.client.meshTLS.identities", mt.Identities); err != nil {
			return nil, err
		}
		for i, sa := range mt.ServiceAccounts {
			field := fmt.Sprintf("spec.client.meshTLS.serviceAccounts[%d]", i)
			if err := validName(field+".name", sa.Name); err != nil {
				return nil, err
			}
			ns, err := refNamespace(field+".namespace", sa.Namespace, m.Namespace)
			if err != nil {
				return nil, err
			}
			a.ServiceAccounts = append(a.ServiceAccounts, compute.Key{Namespace: ns, Name: sa.Name})
		}
	}
	if !a.Unauthenticated && spec.Client.MeshTLS == nil {
		return nil, fmt.Errorf("spec.client: one of unauthenticated and meshTLS is required")
	}
	if !a.Unauthenticated && !a.UnauthenticatedTLS && len(a.Identities)+len(a.ServiceAccounts) == 0 {
		return nil, fmt.Errorf("spec.client.meshTLS: authorizes no clients (set unauthenticatedTLS, identities or serviceAccounts)")
	}
	return a, nil
}
