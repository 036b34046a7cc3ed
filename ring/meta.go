package ring

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/memberlist"
)

// Member metadata is a small JSON object so that fields can be added without breaking
// older members: {"grpc":"10.0.0.7:8086","shape":"p4096/v256/l1.02"}. Unknown fields are
// ignored.
type meta struct {
	GRPC string `json:"grpc"`
	// Shape is the HashConfig the member builds rings with (HashConfig.String). Members
	// from before shapes were advertised have none: they build LegacyHashConfig rings.
	Shape string `json:"shape,omitempty"`
	// Leaving is set by a member about to leave the cluster on purpose: its peers drop it
	// at once when it goes, rather than check whether it is alive (deadHold).
	Leaving bool `json:"leaving,omitempty"`
	// Starting is set by a member in a cold start's wait (Config.ColdStartWait): it has
	// loaded nothing yet. A member that advertises none serves (or is leaving).
	Starting bool `json:"starting,omitempty"`
	// Formed is, for a member that ended a cold start's wait, how many members its ring had
	// then: a member still waiting ends its own wait on seeing it serve only once its ring
	// has as many (gossip may bring the news of the end before that of the last joiner).
	Formed int `json:"formed,omitempty"`
}

// encodeLeavingMeta returns the metadata of a member at grpcAddr, of ring shape shape,
// that is leaving.
func encodeLeavingMeta(grpcAddr, shape string) ([]byte, error) {
	return json.Marshal(meta{GRPC: grpcAddr, Shape: shape, Leaving: true})
}

// leavingMeta reports whether metadata b says its member is leaving.
func leavingMeta(b []byte) bool {
	var m meta
	return json.Unmarshal(b, &m) == nil && m.Leaving
}

// startState is what a member's metadata says of its cold start (meta.Starting, meta.Formed).
type startState struct {
	starting bool
	formed   int
}

// encodeMeta returns the gossip metadata advertising grpcAddr, the ring shape shape
// (HashConfig.String) and the cold-start state st, checking the address and memberlist's
// size limit.
func encodeMeta(grpcAddr, shape string, st startState) ([]byte, error) {
	if err := checkHostPort(grpcAddr); err != nil {
		return nil, fmt.Errorf("gRPC address %q: %w", grpcAddr, err)
	}
	b, err := json.Marshal(meta{GRPC: grpcAddr, Shape: shape, Starting: st.starting, Formed: st.formed})
	if err != nil {
		return nil, err
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("gRPC address %q: metadata of %d bytes exceeds %d", grpcAddr, len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta returns the gRPC address in a member's metadata, and the ring shape it
// advertises: LegacyHashConfig's when it advertises none.
func decodeMeta(b []byte) (addr, shape string, _ error) {
	m, err := parseMeta(b)
	return m.GRPC, m.Shape, err
}

// parseMeta decodes a member's metadata whole, checking its gRPC address and giving the
// legacy shape to one that advertises none (decodeMeta); the zero meta with an error when b
// is not valid metadata.
func parseMeta(b []byte) (meta, error) {
	if len(b) == 0 {
		return meta{}, fmt.Errorf("no metadata (not a Meridian replica?)")
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return meta{}, fmt.Errorf("metadata: %w", err)
	}
	if err := checkHostPort(m.GRPC); err != nil {
		return meta{}, fmt.Errorf("metadata gRPC address %q: %w", m.GRPC, err)
	}
	if m.Shape == "" {
		m.Shape = legacyShape
	}
	return m, nil
}

// legacyShape is what a member that advertises no shape builds with.
var legacyShape = LegacyHashConfig().String()

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
