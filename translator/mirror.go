package translator

import (
	"net"
	"strconv"
	"strings"

	"github.com/meridian-mesh/meridian/snapshot"
)

// Labels and annotations that Linkerd's multicluster service mirror puts on the
// EndpointSlices of a mirror service: its endpoints are the remote cluster's gateway, reached
// with the gateway's identity and the remote service's name as authority.
const (
	// AnnotationRemoteGatewayIdentity is the TLS identity of the gateway ("" or absent: none).
	AnnotationRemoteGatewayIdentity = "mirror.linkerd.io/remote-gateway-identity"
	// AnnotationRemoteServiceFQName is the remote service's fully qualified name; the
	// gateway's endpoints get it, with the port asked for, as their authority override.
	AnnotationRemoteServiceFQName = "mirror.linkerd.io/remote-svc-fq-name"
	// LabelRemoteClusterName names the remote cluster of a mirror.
	LabelRemoteClusterName = "mirror.linkerd.io/cluster-name"
)

// The set labels of a mirror service, as Linkerd's (from LabelRemoteClusterName and
// AnnotationRemoteServiceFQName).
const (
	LabelKeyTargetCluster          = "target_cluster"
	LabelKeyTargetService          = "target_service"
	LabelKeyTargetServiceNamespace = "target_service_namespace"
)

// mirrorEndpoint fills in what an endpoint without a pod of slice es gets from the mirror's
// annotations, for the Service port asked for: the gateway's identity (with the h2 hint and
// HTTP/2 client parameters, as Linkerd gives them); and it returns the remote service's
// authority, the endpoint's authority override ("" when none).
func mirrorEndpoint(e *snapshot.Endpoint, es *EndpointSlice, port uint32) (authorityOverride string) {
	if id := es.Annotations[AnnotationRemoteGatewayIdentity]; id != "" {
		e.SetIdentity(id)
		e.Hint = snapshot.HintH2
		e.HTTP2 = true
	}
	if fq, ok := es.Annotations[AnnotationRemoteServiceFQName]; ok {
		return net.JoinHostPort(fq, strconv.FormatUint(uint64(port), 10))
	}
	return ""
}

// mirrorSetLabels returns the target labels of a mirror service's slices (the first slice,
// by name, that has the remote cluster label), sorted by key, or nil.
func mirrorSetLabels(own []*EndpointSlice) []snapshot.Label {
	for _, es := range own {
		cluster, ok := es.Labels[LabelRemoteClusterName]
		if !ok {
			continue
		}
		out := []snapshot.Label{{Key: LabelKeyTargetCluster, Value: cluster}}
		if fq, ok := es.Annotations[AnnotationRemoteServiceFQName]; ok {
			if parts := strings.Split(fq, "."); len(parts) >= 2 {
				out = append(out,
					snapshot.Label{Key: LabelKeyTargetService, Value: parts[0]},
					snapshot.Label{Key: LabelKeyTargetServiceNamespace, Value: parts[1]})
			}
		}
		return out
	}
	return nil
}
