package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Workload is the workload of a PortSpec: a pod, or an external workload.
type Workload struct {
	Namespace string
	Pod       string
	// External is the name of an ExternalWorkload when the workload is one (Pod is then empty).
	External string
}

// Parse parses PortSpec.workload as Linkerd does: JSON {"ns":..,"pod":..} (or
// {"ns":..,"external_workload":..}), or the legacy "ns:pod". Names must be valid Kubernetes
// names. The error is meant for a person and goes out as InvalidArgument.
func Parse(s string) (Workload, error) {
	var w Workload
	if strings.HasPrefix(s, "{") {
		var j struct {
			NS       *string `json:"ns"`
			Pod      *string `json:"pod"`
			External *string `json:"external_workload"`
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		if err := dec.Decode(&j); err != nil {
			return w, fmt.Errorf("invalid workload %s: %v", quote.String(s), err)
		}
		if dec.More() {
			return w, fmt.Errorf("invalid workload %s: trailing data", quote.String(s))
		}
		switch {
		case j.NS == nil:
			return w, fmt.Errorf("invalid workload %s: missing \"ns\"", quote.String(s))
		case (j.Pod == nil) == (j.External == nil):
			return w, fmt.Errorf("invalid workload %s: want exactly one of \"pod\" and \"external_workload\"", quote.String(s))
		}
		w.Namespace = *j.NS
		if j.Pod != nil {
			w.Pod = *j.Pod
		} else {
			w.External = *j.External
		}
	} else {
		ns, pod, ok := strings.Cut(s, ":")
		if !ok {
			return w, fmt.Errorf("invalid workload %s: want {\"ns\":\"<namespace>\",\"pod\":\"<pod>\"} or <namespace>:<pod>", quote.String(s))
		}
		w.Namespace, w.Pod = ns, pod
	}
	if errs := validation.IsDNS1123Label(w.Namespace); len(errs) > 0 {
		return Workload{}, fmt.Errorf("invalid workload %s: namespace %s: %s", quote.String(s), quote.String(w.Namespace), strings.Join(errs, "; "))
	}
	name := w.Pod + w.External
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return Workload{}, fmt.Errorf("invalid workload %s: name %s: %s", quote.String(s), quote.String(name), strings.Join(errs, "; "))
	}
	return w, nil
}
