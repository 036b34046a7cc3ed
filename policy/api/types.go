package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/meridian-mesh/meridian/internal/serverspec"
)

// Group is the API group of Linkerd's policy resources.
const Group = serverspec.Group

// Kind names an object the policy controller indexes.
type Kind string

// The kinds the policy controller indexes.
const (
	KindPod                   Kind = "Pod"
	KindServer                Kind = "Server"
	KindAuthorizationPolicy   Kind = "AuthorizationPolicy"
	KindMeshTLSAuthentication Kind = "MeshTLSAuthentication"
	KindNetworkAuthentication Kind = "NetworkAuthentication"
	KindServerAuthorization   Kind = "ServerAuthorization"
)

// Kinds lists every indexed kind, in a fixed order.
var Kinds = []Kind{KindPod, KindServer, KindAuthorizationPolicy, KindMeshTLSAuthentication, KindNetworkAuthentication, KindServerAuthorization}

// Resources are the storage-version GroupVersionResources the Kubernetes source watches.
var Resources = map[Kind]schema.GroupVersionResource{
	KindServer:                {Group: Group, Version: "v1beta3", Resource: "servers"},
	KindAuthorizationPolicy:   {Group: Group, Version: "v1alpha1", Resource: "authorizationpolicies"},
	KindMeshTLSAuthentication: {Group: Group, Version: "v1alpha1", Resource: "meshtlsauthentications"},
	KindNetworkAuthentication: {Group: Group, Version: "v1alpha1", Resource: "networkauthentications"},
	KindServerAuthorization:   {Group: Group, Version: "v1beta1", Resource: "serverauthorizations"},
}

// servedVersions are the versions of each kind that conversion accepts.
var servedVersions = map[Kind][]string{
	KindServer:                serverspec.Versions,
	KindAuthorizationPolicy:   {"v1alpha1"},
	KindMeshTLSAuthentication: {"v1alpha1"},
	KindNetworkAuthentication: {"v1alpha1"},
	KindServerAuthorization:   {"v1beta1"},
}

// ServerSpec is the spec of a Server as written: serverspec's, which the destination reads
// too.
type ServerSpec = serverspec.Spec

// TargetRef is a local reference (AuthorizationPolicy.spec.targetRef).
type TargetRef struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// NamespacedRef is a reference that may name another namespace.
type NamespacedRef struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// AuthorizationPolicySpec is the spec of an AuthorizationPolicy (v1alpha1).
type AuthorizationPolicySpec struct {
	TargetRef                  *TargetRef      `json:"targetRef,omitempty"`
	RequiredAuthenticationRefs []NamespacedRef `json:"requiredAuthenticationRefs"`
}

// MeshTLSAuthenticationSpec is the spec of a MeshTLSAuthentication (v1alpha1).
type MeshTLSAuthenticationSpec struct {
	Identities   []string        `json:"identities,omitempty"`
	IdentityRefs []NamespacedRef `json:"identityRefs,omitempty"`
}

// Network is a CIDR with exceptions.
type Network struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}

// NetworkAuthenticationSpec is the spec of a NetworkAuthentication (v1alpha1).
type NetworkAuthenticationSpec struct {
	Networks []Network `json:"networks"`
}

// ServerAuthorizationSpec is the spec of a ServerAuthorization (v1beta1).
type ServerAuthorizationSpec struct {
	Server struct {
		Name     string                `json:"name,omitempty"`
		Selector *metav1.LabelSelector `json:"selector,omitempty"`
	} `json:"server"`
	Client struct {
		Networks        []Network `json:"networks,omitempty"`
		Unauthenticated bool      `json:"unauthenticated,omitempty"`
		MeshTLS         *struct {
			UnauthenticatedTLS bool     `json:"unauthenticatedTLS,omitempty"`
			Identities         []string `json:"identities,omitempty"`
			ServiceAccounts    []struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace,omitempty"`
			} `json:"serviceAccounts,omitempty"`
		} `json:"meshTLS,omitempty"`
	} `json:"client"`
}
