package ring

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"
)

// Member metadata is a small JSON object so that fields can be added without breaking
// older members: {"grpc":"10.0.0.7:8086"}. Unknown fields are ignored.
type meta struct {
	GRPC string `json:"grpc"`
	// Leaving is set by a member about to leave the cluster on purpose: its peers drop it
	// at once when it goes, rather than check whether it is alive (deadHold).
	Leaving bool `json:"leaving,omitempty"`
}

// encodeLeavingMeta returns the metadata of a member at grpcAddr that is leaving.
func encodeLeavingMeta(grpcAddr string) ([]byte, error) {
	return json.Marshal(meta{GRPC: grpcAddr, Leaving: true})
}

// leavingMeta reports whether metadata b says its member is leaving.
func leavingMeta(b []byte) bool {
	var m meta
	return json.Unmarshal(b, &m) == nil && m.Leaving
}

// encodeMeta returns the gossip metadata advertising grpcAddr, checking the address and
// memberlist's size limit.
func encodeMeta(grpcAddr string) ([]byte, error) {
	if err := checkHostPort(grpcAddr); err != nil {
		return nil, fmt.Errorf("gRPC address %q: %w", grpcAddr, err)
	}
	b, err := json.Marshal(meta{GRPC: grpcAddr})
	if err != nil {
		return nil, err
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("gRPC address %q: metadata of %d bytes exceeds %d", grpcAddr, len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta returns the gRPC address in a member's metadata.
func decodeMeta(b []byte) (string, error) {
	if len(b) == 0 {
		return "", fmt.Errorf("no metadata (not a Meridian replica?)")
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("metadata: %w", err)
	}
	if err := checkHostPort(m.GRPC); err != nil {
		return "", fmt.Errorf("metadata gRPC address %q: %w", m.GRPC, err)
	}
	return m.GRPC, nil
}

// checkHostPort accepts host:port with a non-empty host and a port in 1..65535.
func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("empty host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: want 1..65535", port)
	}
	return nil
}
