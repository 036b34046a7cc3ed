package injector

import (
	"fmt"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Warning says that one config.linkerd.io/* (or linkerd.io/inject) annotation was ignored,
// and why. The webhook returns it in the AdmissionResponse's warnings (kubectl prints them),
// logs it and counts it; `meridian inject --manual` prints it.
type Warning struct {
	Annotation string // the annotation's key
	Value      string // its value as found (the message quotes only a prefix)
	At         string // AtWorkload or AtNamespace: where it was found
	Reason     string // why it was ignored, e.g. "want a port in [1, 65535]"
	// Fallback says what happens instead: "the default applies", "the namespace's value
	// applies".
	Fallback string
	// Kept: the value stays on the pod as written, and Fallback says what it means (a
	// require-identity list that does not parse, which the policy controller fails closed
	// on); it is not counted as ignored.
	Kept bool
}

// maxWarningValue bounds how much of a bad value a warning quotes. The API server shortens
// warnings over 256 characters; with it every warning fits.
const maxWarningValue = 40

// String is the warning as a person reads it, e.g.
// `config.linkerd.io/proxy-uid="-5" on the workload is ignored: want an integer id in
// [0, 2147483647]; the default applies`.
func (w Warning) String() string {
	verb := "is ignored"
	if w.Kept {
		verb = "does not parse"
	}
	s := fmt.Sprintf("%s=%s on the %s %s: %s", w.Annotation, quote.Prefix(w.Value, maxWarningValue), w.At, verb, w.Reason)
	if w.Fallback != "" {
		s += "; " + w.Fallback
	}
	return s
}

// Strings returns each warning's String.
func Strings(ws []Warning) []string {
	if len(ws) == 0 {
		return nil
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

// fallbackOf says what applies in place of w's value, once the annotations are settled:
// the namespace's value when the pod's was ignored and the namespace's took effect, else
// the default.
func fallbackOf(w Warning, set map[string]applied) string {
	if w.Fallback != "" {
		return w.Fallback
	}
	if a, ok := set[w.Annotation]; ok && w.At == AtWorkload && a.at == AtNamespace {
		return "the namespace's value applies"
	}
	return "the default applies"
}

// applied is an annotation that took effect: where it was found and its value.
type applied struct{ at, raw string }

// resource returns the default of a resource annotation ("" when none).
func (d ProxyDefaults) resource(key string) string {
	switch key {
	case AnnotationProxyCPURequest:
		return d.CPURequest
	case AnnotationProxyCPULimit:
		return d.CPULimit
	case AnnotationProxyMemoryRequest:
		return d.MemoryRequest
	case AnnotationProxyMemoryLimit:
		return d.MemoryLimit
	case AnnotationProxyEphemeralRequest:
		return d.EphemeralRequest
	case AnnotationProxyEphemeralLimit:
		return d.EphemeralLimit
	}
	return ""
}

// settle ignores the overrides that contradict each other or the defaults, with a Warning
// for each, so that what is left always makes a working proxy:
//   - Two of the proxy's ports (inbound, outbound, admin, control) that are the same: of the
//     pair, an overridden port is reset to its default (the later one in that order when both
//     are), until no two are the same.
//   - A resource request above its limit: the request's override is ignored (the limit, which
//     bounds the pod, is kept); if the default request is still above the limit, the limit's
//     override is ignored too.
//
// Defaults that contradict each other are an error (Config.Validate reports it).
func (r *resolver) settle() ([]Warning, error) {
	warns, err := r.settlePorts()
	if err != nil {
		return nil, err
	}
	more, err := r.settleResources()
	return append(warns, more...), err
}

// reset undoes the override of key, returning the warning that says so.
func (r *resolver) reset(key, reason string) Warning {
	a := r.set[key]
	delete(r.set, key)
	return Warning{Annotation: key, Value: a.raw, At: a.at, Reason: reason, Fallback: "the default applies"}
}

func (r *resolver) settlePorts() ([]Warning, error) {
	ports := []struct {
		key, name string
		p         *int32
		def       int
	}{
		{AnnotationProxyInboundPort, "inbound", &r.v.InboundPort, r.d.InboundPort},
		{AnnotationProxyOutboundPort, "outbound", &r.v.OutboundPort, r.d.OutboundPort},
		{AnnotationProxyAdminPort, "admin", &r.v.AdminPort, r.d.AdminPort},
		{AnnotationProxyControlPort, "control", &r.v.ControlPort, r.d.ControlPort},
	}
	var warns []Warning
	for range len(ports) + 1 { // each round resets one override, or ends
		a, b := -1, -1
		for i := range ports {
			for j := i + 1; j < len(ports) && a < 0; j++ {
				if *ports[i].p == *ports[j].p {
					a, b = i, j
				}
			}
		}
		if a < 0 {
			return warns, nil
		}
		if _, ok := r.set[ports[b].key]; !ok {
			a, b = b, a
		}
		if _, ok := r.set[ports[b].key]; !ok {
			return nil, fmt.Errorf("proxy %s port %d is also the %s port", ports[b].name, *ports[b].p, ports[a].name)
		}
		warns = append(warns, r.reset(ports[b].key, fmt.Sprintf("the %s port is also %d", ports[a].name, *ports[a].p)))
		*ports[b].p = int32(ports[b].def)
	}
	return nil, fmt.Errorf("proxy ports do not settle") // cannot happen: each round resets one of four
}

func (r *resolver) settleResources() ([]Warning, error) {
	var warns []Warning
	for i := 0; i+1 < len(resourceFields); i += 2 {
		reqKey, limKey := resourceFields[i].key, resourceFields[i+1].key
		for _, undo := range []string{reqKey, limKey, ""} {
			req, hasReq := r.res[reqKey]
			lim, hasLim := r.res[limKey]
			if !hasReq || !hasLim || req.Cmp(lim) <= 0 {
				break
			}
			if undo == "" {
				return nil, fmt.Errorf("proxy %s request %s exceeds its limit %s", resourceFields[i].name, req.String(), lim.String())
			}
			if _, ok := r.set[undo]; !ok {
				continue
			}
			reason := fmt.Sprintf("above the limit %s", lim.String())
			if undo == limKey {
				reason = fmt.Sprintf("below the request %s", req.String())
			}
			warns = append(warns, r.reset(undo, reason))
			delete(r.res, undo)
			if s := r.d.resource(undo); s != "" {
				q, err := parseQuantity(s)
				if err != nil {
					return nil, fmt.Errorf("default of %s %q: %w", undo, s, err)
				}
				r.res[undo] = q
			}
		}
	}
	return warns, nil
}
