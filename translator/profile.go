package translator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// ServiceProfileGroup is the API group of Linkerd's ServiceProfile; ServiceProfileVersions
// the versions that decode into ServiceProfileObject (v1alpha2 is the storage version;
// v1alpha1 has the same schema).
const ServiceProfileGroup = "linkerd.io"

// ServiceProfileVersions lists the versions of ServiceProfile.
var ServiceProfileVersions = []string{"v1alpha1", "v1alpha2"}

// ServiceProfileObject is a linkerd.io ServiceProfile as written: the Service it profiles is
// named by the object's name, the Service's fully qualified name
// (<service>.<namespace>.svc.<cluster-domain>); its namespace is the Service's or a client's.
type ServiceProfileObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ServiceProfileSpec `json:"spec"`
}

// ServiceProfileSpec is a ServiceProfile's spec.
type ServiceProfileSpec struct {
	Routes       []*RouteSpec   `json:"routes,omitempty"`
	RetryBudget  *RetryBudget   `json:"retryBudget,omitempty"`
	DstOverrides []*WeightedDst `json:"dstOverrides,omitempty"`
	// OpaquePorts is read by nothing (Linkerd takes opaque ports from the Service's
	// annotation); it is accepted so that profiles that set it decode.
	OpaquePorts json.RawMessage `json:"opaquePorts,omitempty"`
}

// RouteSpec is one route: the requests it matches, how responses are classified, whether
// its requests may be retried, and their timeout.
type RouteSpec struct {
	Name            string           `json:"name"`
	Condition       *RequestMatch    `json:"condition"`
	ResponseClasses []*ResponseClass `json:"responseClasses,omitempty"`
	IsRetryable     bool             `json:"isRetryable,omitempty"`
	Timeout         string           `json:"timeout,omitempty"`
}

// RequestMatch matches requests: every field set must match (all of All, one of Any, not
// Not, the method, the path's regular expression).
type RequestMatch struct {
	All       []*RequestMatch `json:"all,omitempty"`
	Not       *RequestMatch   `json:"not,omitempty"`
	Any       []*RequestMatch `json:"any,omitempty"`
	PathRegex string          `json:"pathRegex,omitempty"`
	Method    string          `json:"method,omitempty"`
}

// ResponseClass classifies the responses its condition matches (failures or not).
type ResponseClass struct {
	Condition *ResponseMatch `json:"condition"`
	IsFailure bool           `json:"isFailure,omitempty"`
}

// ResponseMatch matches responses: every field set must match.
type ResponseMatch struct {
	All    []*ResponseMatch `json:"all,omitempty"`
	Not    *ResponseMatch   `json:"not,omitempty"`
	Any    []*ResponseMatch `json:"any,omitempty"`
	Status *Range           `json:"status,omitempty"`
}

// Range is a range of status codes; 0 leaves a bound open.
type Range struct {
	Min uint32 `json:"min,omitempty"`
	Max uint32 `json:"max,omitempty"`
}

// RetryBudget bounds retries: a ratio of the requests, a floor per second, and the window.
type RetryBudget struct {
	RetryRatio          float32 `json:"retryRatio"`
	MinRetriesPerSecond uint32  `json:"minRetriesPerSecond"`
	TTL                 string  `json:"ttl"`
}

// WeightedDst is an alternate destination of a share of the traffic.
type WeightedDst struct {
	Authority string            `json:"authority"`
	Weight    resource.Quantity `json:"weight"`
}

// ServiceProfile is what the destination keeps of a ServiceProfile (its projection): its
// identity, its spec (all of which is read) and, when the spec is invalid, why (Problem; an
// invalid profile is not served). It is immutable once made; it is a runtime.Object so that
// an informer's cache could hold it in place of the object.
type ServiceProfile struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Spec    ServiceProfileSpec
	Problem string
}

var _ runtime.Object = (*ServiceProfile)(nil)

// DeepCopyObject implements runtime.Object. A ServiceProfile is immutable, so the copy
// shares its spec.
func (p *ServiceProfile) DeepCopyObject() runtime.Object {
	c := *p
	return &c
}

// ProjectServiceProfile returns the projection of a ServiceProfile and, when it is invalid
// as Linkerd's sp-validator judges it (CheckServiceProfile), the error; the projection then
// has its Problem set.
func ProjectServiceProfile(o *ServiceProfileObject) (*ServiceProfile, error) {
	if o == nil {
		return nil, errors.New("no ServiceProfile")
	}
	p := &ServiceProfile{TypeMeta: metav1.TypeMeta{Kind: o.Kind, APIVersion: o.APIVersion}, ObjectMeta: slimMeta(&o.ObjectMeta, nil, nil), Spec: o.Spec}
	p.Spec.OpaquePorts = nil
	err := CheckServiceProfile(o)
	if err != nil {
		p.Problem = err.Error()
	}
	return p, err
}

// ServiceProfileFromUnstructured returns the projection of a ServiceProfile read as
// unstructured content (from a dynamic client), with ProjectServiceProfile's error; content
// that is not a ServiceProfile at all gives a nil profile.
func ServiceProfileFromUnstructured(content map[string]any) (*ServiceProfile, error) {
	var o ServiceProfileObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, &o); err != nil {
		return nil, fmt.Errorf("not a ServiceProfile: %w", err)
	}
	return ProjectServiceProfile(&o)
}

// ValidateServiceProfile checks a ServiceProfile as written (YAML or JSON, as an admission
// request carries it) the way Linkerd's sp-validator does: it must decode strictly (no
// unknown field, every field of its type) and pass CheckServiceProfile.
func ValidateServiceProfile(data []byte) error {
	js, err := yaml.ToJSON(data)
	if err != nil {
		return fmt.Errorf("failed to validate ServiceProfile: %s", shortMessage(err))
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var o ServiceProfileObject
	if err := dec.Decode(&o); err != nil {
		return fmt.Errorf("failed to validate ServiceProfile: %s", shortMessage(err))
	}
	if dec.More() {
		return errors.New("failed to validate ServiceProfile: more than one object")
	}
	return CheckServiceProfile(&o)
}

// shortMessage is err's message, cut to a few hundred bytes (a decoder's message may quote a
// field name of any length).
func shortMessage(err error) string {
	const max = 2 * quote.Max
	msg := err.Error()
	if len(msg) <= max {
		return msg
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", msg[:cut], len(msg))
}

// minStatus and maxStatus bound a status range's ends.
const minStatus, maxStatus = 100, 599

// CheckServiceProfile reports what makes a decoded ServiceProfile invalid, with Linkerd's
// sp-validator's messages: a name that is not a DNS subdomain; a route that is null, has no
// name, no condition, a timeout that is no duration, or a condition (of a request, or of a
// response class) with no field set, a null child, or a status range outside 100-599 or
// inverted; a retry budget with a negative ratio or a TTL that is missing or no duration.
func CheckServiceProfile(o *ServiceProfileObject) error {
	name := quote.String(o.Name)
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return fmt.Errorf("ServiceProfile %s has invalid name: %s", name, errs[0])
	}
	for _, r := range o.Spec.Routes {
		switch {
		case r == nil:
			return fmt.Errorf("ServiceProfile %s has a null route", name)
		case r.Name == "":
			return fmt.Errorf("ServiceProfile %s has a route with no name", name)
		}
		if r.Timeout != "" {
			if _, err := time.ParseDuration(r.Timeout); err != nil {
				return fmt.Errorf("ServiceProfile %s has a route with an invalid timeout: %s", name, quote.Message(err.Error())) // the error quotes the value whole
			}
		}
		if r.Condition == nil {
			return fmt.Errorf("ServiceProfile %s has a route with no condition", name)
		}
		if err := checkRequestMatch(r.Condition); err != nil {
			return fmt.Errorf("ServiceProfile %s has a route with an invalid condition: %w", name, err)
		}
		for _, rc := range r.ResponseClasses {
			switch {
			case rc == nil:
				return fmt.Errorf("ServiceProfile %s has a null response class", name)
			case rc.Condition == nil:
				return fmt.Errorf("ServiceProfile %s has a response class with no condition", name)
			}
			if err := checkResponseMatch(rc.Condition); err != nil {
				return fmt.Errorf("ServiceProfile %s has a response class with an invalid condition: %w", name, err)
			}
		}
	}
	if rb := o.Spec.RetryBudget; rb != nil {
		switch {
		case rb.RetryRatio < 0:
			return fmt.Errorf("ServiceProfile %s RetryBudget RetryRatio must be non-negative: %f", name, rb.RetryRatio)
		case rb.TTL == "":
			return fmt.Errorf("ServiceProfile %s RetryBudget missing TTL field", name)
		}
		if _, err := time.ParseDuration(rb.TTL); err != nil {
			return fmt.Errorf("ServiceProfile %s RetryBudget: %s", name, quote.Message(err.Error()))
		}
	}
	return nil
}

var (
	errNilMatchAll = errors.New(`null condition "all"`)
	errNilMatchAny = errors.New(`null condition "any"`)
	//lint:ignore ST1005 Linkerd's message, which users and tests match
	errRequestMatchField = errors.New("A request match must have a field set")
	//lint:ignore ST1005 Linkerd's message, which users and tests match
	errResponseMatchField = errors.New("A response match must have a field set")
)

// maxMatchDepth bounds the nesting of conditions, so that a hostile profile cannot exhaust
// the stack (the API server's own limit on nesting is higher than a profile ever needs).
const maxMatchDepth = 64

// checkConditions checks the all and any conditions of a match at depth with check, and
// reports whether either is set (a present, even empty, list counts, as in Linkerd).
func checkConditions[M any](all, anyOf []*M, depth int, check func(*M, int) error) (set bool, err error) {
	for _, list := range []struct {
		conds  []*M
		errNil error
	}{{all, errNilMatchAll}, {anyOf, errNilMatchAny}} {
		if list.conds == nil {
			continue
		}
		set = true
		for _, c := range list.conds {
			if c == nil {
				return set, list.errNil
			}
			if err := check(c, depth+1); err != nil {
				return set, err
			}
		}
	}
	return set, nil
}

func checkRequestMatch(m *RequestMatch) error { return checkRequestMatchAt(m, 0) }

func checkRequestMatchAt(m *RequestMatch, depth int) error {
	if depth > maxMatchDepth {
		return fmt.Errorf("conditions nested deeper than %d", maxMatchDepth)
	}
	set, err := checkConditions(m.All, m.Any, depth, checkRequestMatchAt)
	if err != nil {
		return err
	}
	if m.Not != nil {
		set = true
		if err := checkRequestMatchAt(m.Not, depth+1); err != nil {
			return err
		}
	}
	if m.Method != "" || m.PathRegex != "" {
		set = true
	}
	if !set {
		return errRequestMatchField
	}
	return nil
}

func checkResponseMatch(m *ResponseMatch) error { return checkResponseMatchAt(m, 0) }

func checkResponseMatchAt(m *ResponseMatch, depth int) error {
	if depth > maxMatchDepth {
		return fmt.Errorf("conditions nested deeper than %d", maxMatchDepth)
	}
	set, err := checkConditions(m.All, m.Any, depth, checkResponseMatchAt)
	if err != nil {
		return err
	}
	if s := m.Status; s != nil {
		switch {
		case s.Min != 0 && (s.Min < minStatus || s.Min > maxStatus):
			return fmt.Errorf("Range minimum must be between %d and %d, inclusive", minStatus, maxStatus)
		case s.Max != 0 && (s.Max < minStatus || s.Max > maxStatus):
			return fmt.Errorf("Range maximum must be between %d and %d, inclusive", minStatus, maxStatus)
		case s.Max != 0 && s.Min != 0 && s.Max < s.Min:
			return errors.New("Range maximum cannot be smaller than minimum")
		}
		set = true
	}
	if m.Not != nil {
		set = true
		if err := checkResponseMatchAt(m.Not, depth+1); err != nil {
			return err
		}
	}
	if !set {
		return errResponseMatchField
	}
	return nil
}

// ProfiledService returns the Service a ServiceProfile's name profiles
// (<service>.<namespace>.svc.<clusterDomain>), or false when the name is not one.
func ProfiledService(name, clusterDomain string) (service, namespace string, ok bool) {
	rest, found := strings.CutSuffix(name, ".svc."+clusterDomain)
	if !found {
		return "", "", false
	}
	service, namespace, found = strings.Cut(rest, ".")
	if !found || service == "" || namespace == "" || strings.Contains(namespace, ".") {
		return "", "", false
	}
	return service, namespace, true
}

// ServiceProfileName is the name of the ServiceProfiles of a Service.
func ServiceProfileName(service, namespace, clusterDomain string) string {
	return service + "." + namespace + ".svc." + clusterDomain
}
