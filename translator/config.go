package translator

import "fmt"

// Config holds the cluster facts the translation depends on.
type Config struct {
	// ClusterDomain is the cluster's DNS domain ("cluster.local").
	ClusterDomain string
	// ControlPlaneNamespace is the namespace of the control plane ("linkerd"); pods labelled
	// linkerd.io/control-plane-ns with this value are meshed.
	ControlPlaneNamespace string
	// TrustDomain is the identity trust domain ("cluster.local").
	TrustDomain string
	// DefaultOpaquePorts are the opaque ports of a pod without the
	// config.linkerd.io/opaque-ports annotation.
	DefaultOpaquePorts []uint32
	// InboundProxyPort is the proxy's inbound port, sent as opaque_transport for opaque ports
	// (and, in TransportHeader mode, for every port of a meshed pod) when the pod's proxy
	// container does not give its own (Pod.InboundPort).
	InboundProxyPort uint16
	// OutboundTransportMode is Linkerd's --outbound-transport-mode: TransportTransparent
	// (the default: opaque_transport only on opaque ports) or TransportHeader (every meshed
	// endpoint gets the opaque_transport hint, so client proxies reach it at its inbound port
	// with the transport header, which keeps HTTP/1 and HTTP/2 visible to the inbound proxy:
	// the local mesh, where pods share one machine and nothing redirects their traffic).
	OutboundTransportMode string
	// EnableIPv6 is Linkerd's --enable-ipv6: a pod with an IPv4 and an IPv6 endpoint is
	// served by its IPv6 address only (without it, by its IPv4 address only).
	EnableIPv6 bool
	// ExtEndpointZoneWeights is Linkerd's --ext-endpoint-zone-weights: an endpoint in the
	// client's zone weighs ten times the default (100000 against 10000).
	ExtEndpointZoneWeights bool
}

// The values of Config.OutboundTransportMode (Linkerd's).
const (
	TransportTransparent = "transparent"
	TransportHeader      = "transport-header"
)

// ParseOutboundTransportMode checks a --outbound-transport-mode value.
func ParseOutboundTransportMode(s string) (string, error) {
	switch s {
	case TransportTransparent, TransportHeader:
		return s, nil
	}
	return "", fmt.Errorf("outbound transport mode %q: want %s or %s", s, TransportTransparent, TransportHeader)
}

// DefaultConfig returns Linkerd's defaults.
func DefaultConfig() Config {
	return Config{
		ClusterDomain:         "cluster.local",
		ControlPlaneNamespace: "linkerd",
		TrustDomain:           "cluster.local",
		DefaultOpaquePorts:    []uint32{25, 587, 3306, 4444, 5432, 6379, 9300, 11211},
		InboundProxyPort:      4143,
		OutboundTransportMode: TransportTransparent,
	}
}

// Identity returns the TLS identity of service account sa in namespace ns:
// "<sa>.<ns>.serviceaccount.identity.<control-plane-ns>.<trust-domain>".
func Identity(cfg Config, sa, ns string) string {
	return sa + "." + ns + ".serviceaccount.identity." + cfg.ControlPlaneNamespace + "." + cfg.TrustDomain
}
