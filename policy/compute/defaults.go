package compute

import "fmt"

// DefaultPolicy is one of Linkerd's default inbound policies.
type DefaultPolicy int

// The default policies, named as in config.linkerd.io/default-inbound-policy.
const (
	Deny DefaultPolicy = iota
	AllUnauthenticated
	AllAuthenticated
	ClusterUnauthenticated
	ClusterAuthenticated
	Audit
)

var policyNames = [...]string{
	Deny:                   "deny",
	AllUnauthenticated:     "all-unauthenticated",
	AllAuthenticated:       "all-authenticated",
	ClusterUnauthenticated: "cluster-unauthenticated",
	ClusterAuthenticated:   "cluster-authenticated",
	Audit:                  "audit",
}

// String returns the policy's annotation value.
func (p DefaultPolicy) String() string {
	if p < 0 || int(p) >= len(policyNames) {
		return fmt.Sprintf("DefaultPolicy(%d)", int(p))
	}
	return policyNames[p]
}

// ParseDefaultPolicy parses an annotation or flag value.
func ParseDefaultPolicy(s string) (DefaultPolicy, error) {
	for i, n := range policyNames {
		if n == s {
			return DefaultPolicy(i), nil
		}
	}
	return Deny, fmt.Errorf("invalid default inbound policy %q: want one of all-unauthenticated, all-authenticated, cluster-unauthenticated, cluster-authenticated, deny, audit", prefix(s))
}

// authenticated returns the allow policy's authenticated form (require-identity ports).
func (p DefaultPolicy) authenticated() DefaultPolicy {
	switch p {
	case AllUnauthenticated:
		return AllAuthenticated
	case ClusterUnauthenticated:
		return ClusterAuthenticated
	}
	return p
}
