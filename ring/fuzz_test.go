package ring

import (
	"encoding/base64"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseGossipKey(f *testing.F) {
	f.Add([]byte(base64.StdEncoding.EncodeToString(make([]byte, 32))))
	f.Add([]byte("0123456789abcdef"))
	f.Add([]byte("0123456789abcdef\n"))
	f.Add([]byte(" \t\n"))
	f.Add([]byte("===="))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseGossipKey(b)
		if err == nil && !validKeyLen(len(k)) {
			t.Fatalf("accepted a %d-byte key", len(k))
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"grpc":"10.0.0.1:8086"}`))
	f.Add([]byte(`{"grpc":"[fd00::1]:8086","zone":"z"}`))
	f.Add([]byte(`{"grpc":"10.0.0.1:8086","shape":"p4096/v256/l1.02"}`))
	f.Add([]byte(`{"grpc":"10.0.0.1:8086","starting":true,"formed":3}`))
	f.Add([]byte(`{"grpc":""}`))
	f.Add([]byte(`[]`))
	f.Add([]byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		addr, shape, err := decodeMeta(b)
		if err != nil {
			return
		}
		if shape == "" {
			t.Fatalf("decoded %q with no shape (want the legacy one)", b)
		}
		// Whatever decodes re-encodes to metadata that decodes to the same address, shape and
		// cold-start state.
		m, err := parseMeta(b)
		if err != nil || m.GRPC != addr || m.Shape != shape {
			t.Fatalf("parseMeta(%q) = %+v, %v; decodeMeta gave %q, %q", b, m, err, addr, shape)
		}
		st := startState{starting: m.Starting, formed: m.Formed}
		enc, err := encodeMeta(addr, shape, st)
		if err != nil {
			if len(addr)+len(shape) > 400 { // over memberlist's metadata limit
				return
			}
			t.Fatalf("decoded %q, %q but cannot encode them: %v", addr, shape, err)
		}
		if got, gotShape, err := decodeMeta(enc); err != nil || got != addr || gotShape != shape {
			t.Fatalf("round trip of %q, %q = %q, %q, %v", addr, shape, got, gotShape, err)
		}
		if got, err := parseMeta(enc); err != nil || got.Starting != st.starting || got.Formed != st.formed {
			t.Fatalf("round trip of %q: cold-start state %+v, %v; want %+v", b, got, err, st)
		}
	})
}

func FuzzParseJoin(f *testing.F) {
	f.Add("a:1,b,[::1]:7946")
	f.Add(" , ,")
	f.Add("fd00::1,host:65536,node/10.0.0.1")
	f.Add("[")
	f.Fuzz(func(t *testing.T, s string) {
		for _, seed := range ParseJoin(s) {
			if seed == "" || strings.Contains(seed, ",") || strings.TrimSpace(seed) != seed {
				t.Fatalf("ParseJoin(%q) yielded %q", s, seed)
			}
			host, port, err := splitSeed(seed, DefaultGossipPort)
			if err != nil {
				continue
			}
			if host == "" || port < 1 || port > 65535 {
				t.Fatalf("splitSeed(%q) accepted host %q port %d", seed, host, port)
			}
		}
	})
}

// FuzzOwner checks that any key, valid UTF-8 or not, maps to a member of the ring and that
// Owns agrees with Owner, in each shape.
func FuzzOwner(f *testing.F) {
	rings := []*Ring{Build(testMembers(5), DefaultHashConfig()), Build(testMembers(5), RangeHashConfig()), Build(testMembers(5), LegacyHashConfig())}
	f.Add("default/kubernetes")
	f.Add("")
	f.Add("\xff\xfe/\x00")
	f.Fuzz(func(t *testing.T, key string) {
		for _, r := range rings {
			checkOwner(t, r, key)
		}
	})
}

// checkOwner checks r's lookups of key against each other.
func checkOwner(t *testing.T, r *Ring, key string) {
	t.Helper()
	m := r.Owner(key)
	if _, ok := r.Member(m.Name); !ok {
		t.Fatalf("Owner(%q) = %v, not a member", key, m)
	}
	if !r.Owns(key, m.Name) {
		t.Fatalf("Owns(%q, %q) false but Owner says so", key, m.Name)
	}
	p := r.Partition(key)
	if p < 0 || p >= r.Partitions() || r.PartitionOwner(p) != m {
		t.Fatalf("Partition(%q) = %d inconsistent with Owner", key, p)
	}
	if h := KeyHash(key); r.OwnerOfHash(h) != m || !r.OwnsHash(h, m.Name) {
		t.Fatalf("lookups of %q by hash disagree with Owner", key)
	}
	if ns, name, ok := strings.Cut(key, "/"); ok && ServiceHash(ns, name) != KeyHash(key) {
		t.Fatalf("ServiceHash(%q, %q) differs from KeyHash(%q)", ns, name, key)
	}
	_ = utf8.ValidString(key)
}

func FuzzDefaultGossipAddr(f *testing.F) {
	for _, s := range []string{"10.0.0.1:8086", "[fd00::1]:8086", "host:8086", "10.0.0.1", ":8086", "[::ffff:1.2.3.4]:1", "[fe80::1%eth0]:8086"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, grpc string) {
		a, err := DefaultGossipAddr(grpc)
		if err != nil {
			return
		}
		// What it returns binds: an IP address on the gossip port.
		ap, perr := netip.ParseAddrPort(a)
		if perr != nil || ap.Port() != DefaultGossipPort {
			t.Fatalf("DefaultGossipAddr(%q) = %q (%v)", grpc, a, perr)
		}
	})
}
