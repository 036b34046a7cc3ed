package serverspec

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Group is the API group of Linkerd's policy resources, the Server's among them.
const Group = "policy.linkerd.io"

// Versions are the served versions of Server; v1beta3 is the storage version, and the older
// ones are subsets of it.
var Versions = []string{"v1beta1", "v1beta2", "v1beta3"}

// Spec is the spec of a Server as written (v1beta3; v1beta1 and v1beta2 are subsets: no
// externalWorkloadSelector before v1beta2, no accessPolicy before v1beta3). It has every
// field, so that a strict decoder refuses a typo.
type Spec struct {
	PodSelector              *metav1.LabelSelector `json:"podSelector,omitempty"`
	ExternalWorkloadSelector *metav1.LabelSelector `json:"externalWorkloadSelector,omitempty"`
	Port                     *intstr.IntOrString   `json:"port,omitempty"`
	// ProxyProtocol is one of Protocols; empty means unknown.
	ProxyProtocol string `json:"proxyProtocol,omitempty"`
	// AccessPolicy is one of AccessPolicies, the port's default policy; deny when empty.
	AccessPolicy string `json:"accessPolicy,omitempty"`
}

// Protocols are the values of proxyProtocol (the CRD's enum).
var Protocols = []string{"unknown", "HTTP/1", "HTTP/2", "gRPC", "opaque", "TLS"}

// AccessPolicies are the values of accessPolicy: Linkerd's default inbound policies.
var AccessPolicies = []string{"all-unauthenticated", "all-authenticated", "cluster-unauthenticated", "cluster-authenticated", "deny", "audit"}

// Check returns why s is not a valid Server of version (one of Versions; "" is the storage
// version), or nil: a field that version does not have, not exactly one of podSelector and
// externalWorkloadSelector, a selector operator other than In, NotIn, Exists and
// DoesNotExist, no port, a port number out of 1-65535 or a port name that is not one, a
// proxyProtocol not among its values. The error names the field first. The destination and
// the policy controller both refuse a Server it refuses. accessPolicy's value is not among
// its reasons: an unknown one leaves the Server valid, as in Linkerd (the policy controller,
// which parses it as a default policy, warns and denies by default; the destination ignores
// it).
func Check(version string, s *Spec) error {
	if s == nil {
		return errors.New("spec: required")
	}
	if version == "" {
		version = Versions[len(Versions)-1]
	}
	if !slices.Contains(Versions, version) {
		return fmt.Errorf("apiVersion %s/%s: not served (want one of %s)", Group, quote.Message(version), strings.Join(Versions, ", "))
	}
	if version == "v1beta1" && s.ExternalWorkloadSelector != nil {
		return errors.New("spec.externalWorkloadSelector: not in v1beta1")
	}
	if version != "v1beta3" && s.AccessPolicy != "" {
		return fmt.Errorf("spec.accessPolicy: not in %s", version)
	}
	switch {
	case (s.PodSelector == nil) == (s.ExternalWorkloadSelector == nil):
		return errors.New("spec: exactly one of podSelector and externalWorkloadSelector is required")
	case s.PodSelector != nil:
		if err := CheckOperators("spec.podSelector", s.PodSelector); err != nil {
			return err
		}
	default:
		if err := CheckOperators("spec.externalWorkloadSelector", s.ExternalWorkloadSelector); err != nil {
			return err
		}
	}
	if err := checkPort(s.Port); err != nil {
		return err
	}
	if s.ProxyProtocol != "" && !slices.Contains(Protocols, s.ProxyProtocol) {
		return fmt.Errorf("spec.proxyProtocol %s: want one of %s", quote.String(s.ProxyProtocol), strings.Join(Protocols, ", "))
	}
	return nil
}

// CheckOperators refuses a label selector (at field) with an operator other than In, NotIn,
// Exists and DoesNotExist, the one rule of a selector that Linkerd's CRDs check; the policy
// controller applies it to every selector it reads, a Server's and a ServerAuthorization's.
func CheckOperators(field string, s *metav1.LabelSelector) error {
	for i, e := range s.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
		default:
			return fmt.Errorf("%s.matchExpressions[%d].operator %s: want In, NotIn, Exists or DoesNotExist", field, i, quote.Prefix(string(e.Operator), 64))
		}
	}
	return nil
}

func checkPort(p *intstr.IntOrString) error {
	switch {
	case p == nil:
		return errors.New("spec.port: required")
	case p.Type == intstr.Int:
		if p.IntVal < 1 || p.IntVal > 65535 {
			return fmt.Errorf("spec.port: %d out of range 1-65535", p.IntVal)
		}
	default:
		if errs := validation.IsValidPortName(p.StrVal); len(errs) > 0 {
			return fmt.Errorf("spec.port %s: %s", quote.String(p.StrVal), strings.Join(errs, "; "))
		}
	}
	return nil
}
