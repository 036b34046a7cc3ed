package injector

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

// Resolve applies the namespace's and the pod's annotations to c's defaults. An annotation
// whose value cannot be parsed is an error naming it (the webhook then skips the pod with
// ReasonInvalidProxyConfig rather than inject something the user did not ask for).
func (c *Config) Resolve(ns Meta, podAnnotations map[string]string) (Values, error) {
	r := newResolver(c.Proxy)
	for _, key := range ProxyAnnotations {
		raw, ok := lookup(ns, podAnnotations, key)
		if !ok {
			continue
		}
		if err := r.apply(key, strings.TrimSpace(raw)); err != nil {
			return Values{}, fmt.Errorf("annotation %s=%q: %w", key, raw, err)
		}
		r.v.Overridden = append(r.v.Overridden, key)
	}
	return r.finish()
}

// resolver accumulates the effective values while annotations are applied.
type resolver struct {
	v               Values
	initVersion     string
	res             map[string]string // resource annotation -> quantity
	skipIn, skipOut string
}

func newResolver(d ProxyDefaults) *resolver {
	return &resolver{
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
		res: map[string]string{
			AnnotationProxyCPURequest:       d.CPURequest,
			AnnotationProxyCPULimit:         d.CPULimit,
			AnnotationProxyMemoryRequest:    d.MemoryRequest,
			AnnotationProxyMemoryLimit:      d.MemoryLimit,
			AnnotationProxyEphemeralRequest: d.EphemeralRequest,
			AnnotationProxyEphemeralLimit:   d.EphemeralLimit,
		},
		skipIn:  d.SkipInboundPorts,
		skipOut: d.SkipOutbound,
	}
}

// apply applies one annotation's (trimmed) value.
func (r *resolver) apply(key, val string) (err error) {
	v := &r.v
	switch key {
	case AnnotationProxyImage:
		v.Image, err = nonEmpty(val)
	case AnnotationProxyVersionOverride:
		v.Version, err = nonEmpty(val)
	case AnnotationProxyInitImage:
		v.InitImage, err = nonEmpty(val)
	case AnnotationProxyInitImageVersion:
		r.initVersion, err = nonEmpty(val)
	case AnnotationProxyImagePullPolicy:
		switch p := corev1.PullPolicy(val); p {
		case corev1.PullAlways, corev1.PullNever, corev1.PullIfNotPresent:
			v.ImagePullPolicy = p
		default:
			err = fmt.Errorf("want Always, Never or IfNotPresent")
		}
	case AnnotationProxyCPURequest, AnnotationProxyCPULimit, AnnotationProxyMemoryRequest,
		AnnotationProxyMemoryLimit, AnnotationProxyEphemeralRequest, AnnotationProxyEphemeralLimit:
		r.res[key] = val
	case AnnotationProxyLogLevel:
		v.LogLevel, err = nonEmpty(val)
	case AnnotationProxyLogFormat:
		if val != "plain" && val != "json" {
			err = fmt.Errorf("want plain or json")
		}
		v.LogFormat = val
	case AnnotationProxyUID:
		v.UID, err = parseID(val)
	case AnnotationProxyGID:
		v.GID, err = parseID(val)
	case AnnotationProxyInboundPort:
		v.InboundPort, err = parsePort(val)
	case AnnotationProxyOutboundPort:
		v.OutboundPort, err = parsePort(val)
	case AnnotationProxyAdminPort:
		v.AdminPort, err = parsePort(val)
	case AnnotationProxyControlPort:
		v.ControlPort, err = parsePort(val)
	case AnnotationSkipInboundPorts:
		r.skipIn = val
	case AnnotationSkipOutboundPorts:
		r.skipOut = val
	case AnnotationNativeSidecar:
		v.NativeSidecar, err = strconv.ParseBool(val)
	case AnnotationDefaultInboundPolicy:
		switch val {
		case "all-unauthenticated", "all-authenticated", "cluster-unauthenticated",
			"cluster-authenticated", "deny", "audit":
			v.DefaultInbound = val
		default:
			err = fmt.Errorf("unknown policy")
		}
	}
	return err
}

// finish derives what follows from the applied values and checks them together.
func (r *resolver) finish() (Values, error) {
	v := r.v
	if v.InitImage == "" {
		v.InitImage = v.Image
	}
	if r.initVersion == "" {
		r.initVersion = v.Version
	}
	v.InitImage = imageRef(v.InitImage, r.initVersion)
	v.Image = imageRef(v.Image, v.Version)

	var err error
	if v.SkipInbound, err = ParsePortList(r.skipIn); err != nil {
		return Values{}, fmt.Errorf("skip-inbound-ports %q: %w", r.skipIn, err)
	}
	if v.SkipOutbound, err = ParsePortList(r.skipOut); err != nil {
		return Values{}, fmt.Errorf("skip-outbound-ports %q: %w", r.skipOut, err)
	}
	ports := map[int32]string{}
	for _, p := range []struct {
		name string
		port int32
	}{{"inbound", v.InboundPort}, {"outbound", v.OutboundPort}, {"admin", v.AdminPort}, {"control", v.ControlPort}} {
		if other, dup := ports[p.port]; dup {
			return Values{}, fmt.Errorf("proxy %s port %d is also the %s port", p.name, p.port, other)
		}
		ports[p.port] = p.name
	}
	if v.Resources, err = resources(r.res); err != nil {
		return Values{}, err
	}
	return v, nil
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

func parsePort(s string) (int32, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
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
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		item := strconv.Itoa(int(a))
		if isRange {
			b, err := parsePort(strings.TrimSpace(hi))
			if err != nil {
				return nil, fmt.Errorf("%q: %w", f, err)
			}
			if b < a {
				return nil, fmt.Errorf("%q: range end below its start", f)
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

func resources(res map[string]string) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	set := func(dst *corev1.ResourceList, name corev1.ResourceName, key string) error {
		s := res[key]
		if s == "" {
			return nil
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return fmt.Errorf("annotation %s=%q: %w", key, s, err)
		}
		if q.Sign() < 0 {
			return fmt.Errorf("annotation %s=%q: negative quantity", key, s)
		}
		if *dst == nil {
			*dst = corev1.ResourceList{}
		}
		(*dst)[name] = q
		return nil
	}
	for _, s := range []struct {
		dst  *corev1.ResourceList
		name corev1.ResourceName
		key  string
	}{
		{&r.Requests, corev1.ResourceCPU, AnnotationProxyCPURequest},
		{&r.Limits, corev1.ResourceCPU, AnnotationProxyCPULimit},
		{&r.Requests, corev1.ResourceMemory, AnnotationProxyMemoryRequest},
		{&r.Limits, corev1.ResourceMemory, AnnotationProxyMemoryLimit},
		{&r.Requests, corev1.ResourceEphemeralStorage, AnnotationProxyEphemeralRequest},
		{&r.Limits, corev1.ResourceEphemeralStorage, AnnotationProxyEphemeralLimit},
	} {
		if err := set(s.dst, s.name, s.key); err != nil {
			return r, err
		}
	}
	for name, lim := range r.Limits {
		if req, ok := r.Requests[name]; ok && req.Cmp(lim) > 0 {
			return r, fmt.Errorf("proxy %s request %s exceeds its limit %s", name, req.String(), lim.String())
		}
	}
	return r, nil
}
