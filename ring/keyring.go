package ring

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// keyMetrics are the figures of gossip encryption.
type keyMetrics struct {
	insecure prometheus.Gauge   // 1 while gossip is plaintext (InsecureGossip)
	keys     prometheus.Gauge   // keys installed, the primary included
	refused  prometheus.Counter // messages no installed key opened, or not encrypted
}

func newKeyMetrics() keyMetrics {
	return keyMetrics{
		insecure: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ring_insecure_gossip",
			Help: "1 when this replica gossips in plaintext (--insecure-gossip): any process that reaches its gossip port can join the ring; 0 when gossip is encrypted.",
		}),
		keys: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ring_gossip_keys",
			Help: "Gossip keys installed in this replica's keyring, the primary included (2 during a rotation).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ring_gossip_refused_total",
			Help: "Gossip messages and streams refused because no installed key opens them or they are not encrypted (a process with another key, or none, trying to join).",
		}),
	}
}

func (m keyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.insecure, m.keys, m.refused}
}

// newKeyring returns the keyring for cfg's keys, nil for plaintext gossip.
func newKeyring(cfg Config) (*memberlist.Keyring, error) {
	if len(cfg.GossipKey) == 0 {
		return nil, nil
	}
	accepted := make([][]byte, 0, len(cfg.AcceptedKeys))
	for _, k := range cfg.AcceptedKeys {
		accepted = append(accepted, bytes.Clone(k))
	}
	kr, err := memberlist.NewKeyring(accepted, bytes.Clone(cfg.GossipKey))
	if err != nil {
		return nil, fmt.Errorf("ring: gossip keyring: %w", err)
	}
	return kr, nil
}

// SetGossipKeys makes primary the key this member encrypts with and primary plus accepted
// the keys it opens messages with, on the running member: keys not listed are removed,
// and at no moment does the keyring lack a key of the old or the new set that is kept.
// It returns an error, and keeps the current keys, when a key is not 16, 24 or 32 bytes,
// primary is empty, or this member gossips in plaintext (encrypting takes a restart with a
// key). Safe for concurrent use.
//
// A rotation from key A to key B without losing a member is three steps, each done on
// every member before the next begins: SetGossipKeys(A, B) (B accepted everywhere), then
// SetGossipKeys(B, A) (everyone sends with B and still opens A), then SetGossipKeys(B).
func (c *Cluster) SetGossipKeys(primary []byte, accepted ...[]byte) error {
	if c.keyring == nil {
		return errors.New("ring: gossip runs in plaintext (InsecureGossip); encrypting it takes a restart with a key")
	}
	if len(primary) == 0 {
		return errors.New("ring: no primary gossip key; keeping the current keys")
	}
	if err := checkKeys(primary, accepted); err != nil {
		return fmt.Errorf("ring: %w; keeping the current keys", err)
	}
	want := [][]byte{primary}
	for _, k := range accepted {
		if !slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, k) }) {
			want = append(want, k)
		}
	}
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	oldPrimary := c.keyring.GetPrimaryKey()
	old := slices.Clone(c.keyring.GetKeys())
	// Add first, then switch the primary, then remove: the keyring only ever holds a
	// superset of what is kept, and it is never empty.
	for _, k := range want {
		if err := c.keyring.AddKey(bytes.Clone(k)); err != nil {
			return fmt.Errorf("ring: install gossip key: %w", err)
		}
	}
	if err := c.keyring.UseKey(primary); err != nil {
		return fmt.Errorf("ring: use gossip key: %w", err)
	}
	var removed [][]byte
	for _, k := range old {
		if slices.ContainsFunc(want, func(w []byte) bool { return bytes.Equal(w, k) }) {
			continue
		}
		// memberlist's RemoveKey shifts the keys in place, in the array that GetKeys has
		// handed to the goroutines decrypting packets; UseKey just before gives the
		// keyring a fresh array that no decryption has been handed yet.
		_ = c.keyring.UseKey(primary)
		if err := c.keyring.RemoveKey(k); err != nil {
			return fmt.Errorf("ring: remove gossip key: %w", err)
		}
		removed = append(removed, k)
	}
	c.keyMetrics.keys.Set(float64(len(c.keyring.GetKeys())))
	if !bytes.Equal(oldPrimary, primary) || len(removed) > 0 || len(old) != len(want) {
		c.log.Info("gossip keys changed",
			zap.String("primary", KeyFingerprint(primary)),
			zap.Strings("accepted", fingerprints(want[1:])),
			zap.Strings("removed", fingerprints(removed)))
	}
	return nil
}

// GossipKeys returns copies of the primary key and the accepted keys this member holds;
// nil for plaintext gossip.
func (c *Cluster) GossipKeys() (primary []byte, accepted [][]byte) {
	if c.keyring == nil {
		return nil, nil
	}
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	keys := c.keyring.GetKeys()
	for _, k := range keys[1:] {
		accepted = append(accepted, bytes.Clone(k))
	}
	return bytes.Clone(keys[0]), accepted
}

// Warnings says, for /ready, that gossip is plaintext when it is (run.Warner).
func (c *Cluster) Warnings() []string {
	if c.keyring != nil {
		return nil
	}
	return []string{"gossip is not encrypted (--insecure-gossip): any process that reaches " + c.GossipAddr() + " can join the ring and serve its own endpoints"}
}

// KeyFingerprint names a key in logs without revealing it: the first 8 hex digits of its
// SHA-256.
func KeyFingerprint(k []byte) string {
	sum := sha256.Sum256(k)
	return hex.EncodeToString(sum[:4])
}

func fingerprints(keys [][]byte) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, KeyFingerprint(k))
	}
	return out
}

// refusedMessage reports whether a memberlist error line says that a packet or stream was
// refused for its encryption: no installed key opens it, or it is plaintext while ours is
// encrypted. memberlist has no hook for this; its log lines are the one signal.
func refusedMessage(msg string) bool {
	return strings.HasPrefix(msg, "Decrypt packet failed") ||
		strings.Contains(msg, "no installed keys could decrypt") ||
		strings.Contains(msg, "encryption is configured but remote state is not encrypted")
}
