package injector

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/meridian-mesh/meridian/internal/logging"
	"github.com/meridian-mesh/meridian/internal/quote"
)

// Meta is the metadata of a namespace that the decision and the overrides read.
// Maps may be nil; they are never modified.
type Meta struct {
	Labels      map[string]string
	Annotations map[string]string
}

// Values are the effective proxy settings for one pod: the Config defaults with the
// namespace's and then the pod's config.linkerd.io/* annotations applied.
type Values struct {
	Image           string
	InitImage       string
	Version         string
	ImagePullPolicy corev1.PullPolicy
	Resources       corev1.ResourceRequirements
	LogLevel        string
	LogFormat       string
	UID             int64
	GID             int64 // -1: not set
	InboundPort     int32
	OutboundPort    int32
	AdminPort       int32
	ControlPort     int32
	SkipInbound     []string // ports or lo-hi ranges, validated
	SkipOutbound    []string
	NativeSidecar   bool
	DefaultInbound  string
	// Overridden lists the annotations that changed a default, in ProxyAnnotations order.
	Overridden []string
}

// lookup returns the effective value of an annotation: the pod's if present, else the
// namespace's. This is how namespace annotations flow down.
func lookup(ns Meta, pod map[string]string, key string) (string, bool) {
	if v, ok := pod[key]; ok {
		return v, true
	}
	v, ok := ns.Annotations[key]
	return v, ok
}

// FailClosedInboundPolicy is the default inbound policy of a pod whose
// default-inbound-policy annotation (its own, or else its namespace's) does not parse.
const FailClosedInboundPolicy = "deny"

// Resolve applies the namespace's and the pod's annotations to c's defaults. A bad override
// never stops injection: an annotation whose value does not parse is ignored (the pod's
// falls back to the namespace's, which falls back to the default), but for
// default-inbound-policy, which fails closed (FailClosedInboundPolicy: the pod's bad value
// is then the only one reported, the namespace's not being read); and so are overrides
// that contradict each other or the defaults (two proxy ports that are the same, a resource
// request above its limit; see settle). Each ignored annotation is a Warning. The error is
// for defaults that are themselves invalid (Config.Validate reports it).
func (c *Config) Resolve(ns Meta, podAnnotations map[string]string) (Values, []Warning, error) {
	r := newResolver(c.Proxy)
	var warns []Warning
	for _, key := range ProxyAnnotations {
		for _, src := range annotationSources(ns, podAnnotations) {
			raw, ok := src.anns[key]
			if !ok {
				continue
			}
			if err := r.apply(key, strings.TrimSpace(raw)); err != nil {
				w := Warning{Annotation: key, Value: raw, At: src.at, Reason: err.Error()}
				if key == AnnotationDefaultInboundPolicy {
					// Fails closed: a default policy that does not parse ("Deny") must not
					// leave the pod on a wider one, the namespace's or the cluster's.
					r.v.DefaultInbound = FailClosedInboundPolicy
					w.Fallback = "deny applies" // short: with the value and the reason, a warning stays within 256 bytes
					warns = append(warns, w)
					break
				}
				warns = append(warns, w)
				continue
			}
			r.set[key] = applied{at: src.at, raw: raw}
			break
		}
	}
	v, more, err := r.finish()
	if err != nil {
		return Values{}, nil, err
	}
	warns = append(warns, more...)
	for _, key := range ProxyAnnotations {
		if _, ok := r.set[key]; ok {
			v.Overridden = append(v.Overridden, key)
		}
	}
	for i := range warns {
		warns[i].Fallback = fallbackOf(warns[i], r.set)
	}
	return v, warns, nil
}

// annotationSource is where an annotation is looked for: at (AtWorkload, AtNamespace) and
// the annotations there.
type annotationSource struct {
	at   string
	anns map[string]string
}

// annotationSources are the places an annotation is looked for, the pod's first.
func annotationSources(ns Meta, pod map[string]string) [2]annotationSource {
	return [2]annotationSource{{AtWorkload, pod}, {AtNamespace, ns.Annotations}}
}

// resolver accumulates the effective values while annotations are applied. apply changes a
// field only when the value is valid.
type resolver struct {
	d               ProxyDefaults
	v               Values
	initVersion     string
	res             map[string]resource.Quantity // resource annotation -> quantity; absent: none
	skipIn, skipOut string
	// set holds each annotation that took effect, with where it was found.
	set map[string]applied
}

func newResolver(d ProxyDefaults) *resolver {
	return &resolver{
		d: d,
		v: Values{
			Image:           d.Image,
			InitImage:       d.InitImage,
			Version:         d.Version,
			ImagePullPolicy: corev1.PullPolicy(d.ImagePullPolicy),
			LogLevel:        d.LogLevel,
			LogFormat:       d.LogFormat,
			UID:             d.UID,
			GID:             d.GID,
			InboundPort:     int32(d.InboundPort),
			OutboundPort:    int32(d.OutboundPort),
			AdminPort:       int32(d.AdminPort),
			ControlPort:     int32(d.ControlPort),
			NativeSidecar:   d.NativeSidecar,
			DefaultInbound:  d.DefaultInbound,
		},
		initVersion: d.InitVersion,
		res:         map[string]resource.Quantity{},
		skipIn:      d.SkipInboundPorts,
		skipOut:     d.SkipOutbound,
		set:         map[string]applied{},
	}
}

// assign stores parse(s) in *dst when it parses, and leaves *dst alone when not.
func assign[T any](dst *T, s string, parse func(string) (T, error)) error {
	x, err := parse(s)
	if err == nil {
		*dst = x
	}
	return err
}

// apply applies one annotation's (trimmed) value, or returns why it cannot (and changes
// nothing).
func (r *resolver) apply(key, val string) error {
	v := &r.v
	switch key {
	case AnnotationProxyImage:
		return assign(&v.Image, val, nonEmpty)
	case AnnotationProxyVersionOverride:
		return assign(&v.Version, val, nonEmpty)
	case AnnotationProxyInitImage:
		return assign(&v.InitImage, val, nonEmpty)
	case AnnotationProxyInitImageVersion:
		return assign(&r.initVersion, val, nonEmpty)
	case AnnotationProxyImagePullPolicy:
		return assign(&v.ImagePullPolicy, val, parsePullPolicy)
	case AnnotationProxyCPURequest, AnnotationProxyCPULimit, AnnotationProxyMemoryRequest,
		AnnotationProxyMemoryLimit, AnnotationProxyEphemeralRequest, AnnotationProxyEphemeralLimit:
		q, err := parseQuantity(val)
		if err == nil {
			r.res[key] = q
		}
		return err
	case AnnotationProxyLogLevel:
		return assign(&v.LogLevel, val, proxyLogFilter)
	case AnnotationProxyLogFormat:
		return assign(&v.LogFormat, val, oneOf("plain", "json"))
	case AnnotationProxyUID:
		return assign(&v.UID, val, parseUID)
	case AnnotationProxyGID:
		return assign(&v.GID, val, parseID)
	case AnnotationProxyInboundPort:
		return assign(&v.InboundPort, val, parsePort)
	case AnnotationProxyOutboundPort:
		return assign(&v.OutboundPort, val, parsePort)
	case AnnotationProxyAdminPort:
		return assign(&v.AdminPort, val, parsePort)
	case AnnotationProxyControlPort:
		return assign(&v.ControlPort, val, parsePort)
	case AnnotationSkipInboundPorts:
		return assign(&r.skipIn, val, checkPortList)
	case AnnotationSkipOutboundPorts:
		return assign(&r.skipOut, val, checkPortList)
	case AnnotationNativeSidecar:
		return assign(&v.NativeSidecar, val, parseBool)
	case AnnotationDefaultInboundPolicy:
		return assign(&v.DefaultInbound, val, oneOf("all-unauthenticated", "all-authenticated",
			"cluster-unauthenticated", "cluster-authenticated", "deny", "audit"))
	}
	return nil
}

// finish derives what follows from the applied values, settles the overrides that
// contradict each other (see settle) and checks the defaults.
func (r *resolver) finish() (Values, []Warning, error) {
	for _, f := range resourceFields {
		s := r.d.resource(f.key)
		if _, overridden := r.res[f.key]; overridden || s == "" {
			continue
		}
		q, err := parseQuantity(s)
		if err != nil {
			return Values{}, nil, fmt.Errorf("default of %s %q: %w", f.key, s, err)
		}
		r.res[f.key] = q
	}
	warns, err := r.settle()
	if err != nil {
		return Values{}, nil, err
	}
	v := r.v
	if v.InitImage == "" {
		v.InitImage = v.Image
	}
	if r.initVersion == "" {
		r.initVersion = v.Version
	}
	v.InitImage = imageRef(v.InitImage, r.initVersion)
	v.Image = imageRef(v.Image, v.Version)
	if v.SkipInbound, err = ParsePortList(r.skipIn); err != nil {
		return Values{}, nil, fmt.Errorf("skip-inbound-ports %q: %w", r.skipIn, err)
	}
	if v.SkipOutbound, err = ParsePortList(r.skipOut); err != nil {
		return Values{}, nil, fmt.Errorf("skip-outbound-ports %q: %w", r.skipOut, err)
	}
	v.Resources = r.resources()
	return v, warns, nil
}

// imageRef joins an image name and a tag, unless the name already carries a tag or digest.
func imageRef(image, version string) string {
	if version == "" || strings.Contains(image, "@") {
		return image
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image
	}
	return image + ":" + version
}

// proxyLogFilter accepts a log filter the proxy can start with (an unknown level would stop
// it, and the pod with it).
func proxyLogFilter(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty")
	}
	if err := logging.CheckProxyFilter(s); err != nil {
		return "", errors.New("the proxy's log level must be trace, debug, info, warn, error or off (a filter such as warn,linkerd=info)")
	}
	return s, nil
}

func nonEmpty(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty")
	}
	return s, nil
}

func parseID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<31-1 {
		return 0, fmt.Errorf("want an integer id in [0, 2147483647]")
	}
	return n, nil
}

// parseUID is parseID without 0: the proxy runs with runAsNonRoot, so the kubelet would
// refuse to start it as root, and proxy-init's rules would exempt root's traffic.
func parseUID(s string) (int64, error) {
	n, err := parseID(s)
	if err == nil && n == 0 {
		return 0, fmt.Errorf("want a non-root user id in [1, 2147483647]: the proxy runs as non-root")
	}
	return n, err
}

// maxQuantityExponent bounds the decimal exponent (1e18: 10^18) of a quantity parseQuantity
// accepts; the SI suffixes (up to E, 10^18, and Ei, 2^60) are not exponents.
const maxQuantityExponent = 18

// checkQuantityExponent refuses a quantity whose decimal exponent (the digits after an e or
// E that is not the suffix E or Ei) is not an integer within ±maxQuantityExponent, and one
// longer than 64 bytes.
func checkQuantityExponent(s string) error {
	if len(s) > 64 {
		return fmt.Errorf("not a quantity (over 64 bytes)")
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return nil
	}
	rest := s[i+1:]
	if rest == "" || rest == "i" {
		return nil // the suffix E (exa) or Ei (exbi)
	}
	exp, err := strconv.Atoi(rest)
	if err != nil || exp > maxQuantityExponent || exp < -maxQuantityExponent {
		return fmt.Errorf("not a quantity (want e.g. 100m, 1, 64Mi; an exponent within ±%d)", maxQuantityExponent)
	}
	return nil
}

func parsePullPolicy(s string) (corev1.PullPolicy, error) {
	switch p := corev1.PullPolicy(s); p {
	case corev1.PullAlways, corev1.PullNever, corev1.PullIfNotPresent:
		return p, nil
	}
	return "", fmt.Errorf("want Always, Never or IfNotPresent")
}

// parseQuantity parses a resource quantity (100m, 64Mi), which must not be negative.
//
// Its exponent is checked first: resource.ParseQuantity computes with the decimal exponent as
// written, and ".2E2220022122" kept it squaring numbers of millions of digits for minutes
// (FuzzResolve found it; an annotation is any string a pod's author writes). A proxy's CPU
// or memory quantity needs no exponent beyond ±maxQuantityExponent.
func parseQuantity(s string) (resource.Quantity, error) {
	if err := checkQuantityExponent(s); err != nil {
		return resource.Quantity{}, err
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		// resource's message is a regular expression: say it in words.
		return q, fmt.Errorf("not a quantity (want e.g. 100m, 1, 64Mi)")
	}
	if q.Sign() < 0 {
		return q, fmt.Errorf("negative quantity")
	}
	return q, nil
}

// oneOf returns a parser accepting exactly the values given.
func oneOf(values ...string) func(string) (string, error) {
	return func(s string) (string, error) {
		for _, v := range values {
			if s == v {
				return s, nil
			}
		}
		return "", fmt.Errorf("want %s", strings.Join(values, ", "))
	}
}

func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("want true or false")
	}
	return b, nil
}

// checkPortList returns s when it is a valid skip-ports list.
func checkPortList(s string) (string, error) {
	_, err := ParsePortList(s)
	return s, err
}

func parsePort(s string) (int32, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '+' { // digits only, as the policy controller reads a port list
		return 0, fmt.Errorf("want a port in [1, 65535]")
	}
	return int32(n), nil
}

// ParsePortList parses Linkerd's skip-ports syntax: a comma-separated list of ports and
// inclusive ranges ("25,443,8000-9000"). Spaces are ignored; duplicates are kept once, in
// first-seen order. It returns ports and ranges in the lo-hi form.
func ParsePortList(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := parsePort(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", quote.Prefix(f, 32), err)
		}
		item := strconv.Itoa(int(a))
		if isRange {
			b, err := parsePort(strings.TrimSpace(hi))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", quote.Prefix(f, 32), err)
			}
			if b < a {
				return nil, fmt.Errorf("%s: range end below its start", quote.Prefix(f, 32))
			}
			if b != a {
				item = fmt.Sprintf("%d-%d", a, b)
			}
		}
		if !seen[item] {
			seen[item] = true
			out = append(out, item)
		}
	}
	return out, nil
}

// resources builds the proxy's requirements from the settled quantities.
func (r *resolver) resources() corev1.ResourceRequirements {
	var out corev1.ResourceRequirements
	for _, s := range resourceFields {
		q, ok := r.res[s.key]
		if !ok {
			continue
		}
		dst := &out.Requests
		if s.limit {
			dst = &out.Limits
		}
		if *dst == nil {
			*dst = corev1.ResourceList{}
		}
		(*dst)[s.name] = q
	}
	return out
}

// resourceFields are the resource annotations, each a request or a limit of one resource.
var resourceFields = []struct {
	key   string
	name  corev1.ResourceName
	limit bool
}{
	{AnnotationProxyCPURequest, corev1.ResourceCPU, false},
	{AnnotationProxyCPULimit, corev1.ResourceCPU, true},
	{AnnotationProxyMemoryRequest, corev1.ResourceMemory, false},
	{AnnotationProxyMemoryLimit, corev1.ResourceMemory, true},
	{AnnotationProxyEphemeralRequest, corev1.ResourceEphemeralStorage, false},
	{AnnotationProxyEphemeralLimit, corev1.ResourceEphemeralStorage, true},
}
