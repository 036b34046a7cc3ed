package ring

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestParseJoin(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"a:1", []string{"a:1"}},
		{"a:1, b , [::1]:7946,,meridian-gossip.meridian.svc.cluster.local", []string{"a:1", "b", "[::1]:7946", "meridian-gossip.meridian.svc.cluster.local"}},
	} {
		if got := ParseJoin(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("ParseJoin(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCheckSeed(t *testing.T) {
	for _, tc := range []struct {
		seed     string
		host     string
		port     int
		wantFail bool
	}{
		{seed: "10.0.0.1:7000", host: "10.0.0.1", port: 7000},
		{seed: "10.0.0.1", host: "10.0.0.1", port: 7946},
		{seed: "svc.ns.svc.cluster.local", host: "svc.ns.svc.cluster.local", port: 7946},
		{seed: "svc:8000", host: "svc", port: 8000},
		{seed: "[fd00::1]:7000", host: "fd00::1", port: 7000},
		{seed: "fd00::1", host: "fd00::1", port: 7946},
		{seed: "", wantFail: true},
		{seed: ":7946", wantFail: true},
		{seed: "host:0", wantFail: true},
		{seed: "host:65536", wantFail: true},
		{seed: "host:http", wantFail: true},
		{seed: "host:", wantFail: true},
		{seed: "a b:1", wantFail: true},
		{seed: "[fd00::1", wantFail: true},
		{seed: "fd00::zz", wantFail: true},
		{seed: "node/10.0.0.1:1", wantFail: true},
	} {
		host, port, err := splitSeed(tc.seed, DefaultGossipPort)
		if tc.wantFail {
			if err == nil {
				t.Errorf("splitSeed(%q) = %q, %d; want an error", tc.seed, host, port)
			}
			if CheckSeed(tc.seed) == nil {
				t.Errorf("CheckSeed(%q) accepted", tc.seed)
			}
			continue
		}
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("splitSeed(%q) = %q, %d, %v; want %q, %d", tc.seed, host, port, err, tc.host, tc.port)
		}
	}
}

func TestParseGossipKey(t *testing.T) {
	raw32 := bytes.Repeat([]byte{0xfe}, 32)
	raw16 := []byte("0123456789abcdef")
	b64 := base64.StdEncoding.EncodeToString(raw32)
	for _, tc := range []struct {
		name string
		in   []byte
		want []byte
	}{
		{"base64 32", []byte(b64), raw32},
		{"base64 with newline", []byte(b64 + "\n"), raw32},
		{"base64 unpadded 16", []byte(base64.RawStdEncoding.EncodeToString(raw16)), raw16},
		{"raw 32", raw32, raw32},
		{"raw 16", raw16, raw16},
		{"raw 16 with newline", append(slices.Clone(raw16), '\n'), raw16},
		{"too short", []byte("abc"), nil},
		{"base64 of 20 bytes", []byte(base64.StdEncoding.EncodeToString(make([]byte, 20))), nil},
		{"empty", nil, nil},
	} {
		got, err := ParseGossipKey(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s: ParseGossipKey accepted %d bytes", tc.name, len(got))
			}
			continue
		}
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: ParseGossipKey = %x, %v; want %x", tc.name, got, err, tc.want)
		}
	}
}

func TestLoadGossipKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "key")
	if err := os.WriteFile(good, []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadGossipKey(good); err != nil || len(k) != 32 {
		t.Errorf("LoadGossipKey = %d bytes, %v", len(k), err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadGossipKey(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadGossipKey(bad) error %v does not name the file", err)
	}
	if _, err := LoadGossipKey(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("LoadGossipKey(missing) error %v", err)
	}
}

func TestMeta(t *testing.T) {
	b, err := encodeMeta("10.1.2.3:8086", RangeHashConfig().String(), startState{})
	if err != nil {
		t.Fatal(err)
	}
	if got, shape, err := decodeMeta(b); err != nil || got != "10.1.2.3:8086" || shape != "p4096/v64/l1.05/contiguous" {
		t.Errorf("round trip = %q, %q, %v", got, shape, err)
	}
	// Fields added by later versions are ignored; a member that advertises no shape (a
	// version from before shapes) builds legacy rings.
	if got, shape, err := decodeMeta([]byte(`{"grpc":"[fd00::1]:8086","zone":"a"}`)); err != nil || got != "[fd00::1]:8086" || shape != "p4096/v256/l1.25" {
		t.Errorf("decode with extra field = %q, %q, %v", got, shape, err)
	}
	for _, bad := range []string{"", "{}", "null", `{"grpc":"nohost"}`, `{"grpc":":1"}`, `{"grpc":"h:0"}`, `{"grpc":5}`, `{"grpc":"h:1","shape":5}`, "\x00"} {
		if got, _, err := decodeMeta([]byte(bad)); err == nil {
			t.Errorf("decodeMeta(%q) = %q, want an error", bad, got)
		}
	}
}

func TestValidateDefaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NodeName, cfg.GRPCAddr, cfg.InsecureGossip = "n", "127.0.0.1:8086", true
	cfg.Fast = true
	cfg.JoinRetryMax = 0
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.JoinRetryMin != 50*time.Millisecond || cfg.JoinRetryMax != time.Second || cfg.RejoinInterval != 200*time.Millisecond {
		t.Errorf("Fast did not shorten the retry intervals: %v %v %v", cfg.JoinRetryMin, cfg.JoinRetryMax, cfg.RejoinInterval)
	}
	if cfg.GossipAddr != "127.0.0.1:7946" {
		t.Errorf("default gossip address %q, want the gRPC host on 7946", cfg.GossipAddr)
	}
	cfg = DefaultConfig()
	cfg.NodeName, cfg.GRPCAddr, cfg.GossipKey = "n", "127.0.0.1:8086", testKey('k')
	cfg.JoinRetryMin, cfg.JoinRetryMax = 3*time.Second, time.Second
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.JoinRetryMax != 3*time.Second {
		t.Errorf("JoinRetryMax %v below JoinRetryMin", cfg.JoinRetryMax)
	}
}

func TestMemberlistLog(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"})
	w := memberlistLog{l: zap.New(core), refused: refused}
	for _, line := range []string{
		"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n",
		"[WARN] memberlist: Refuting a suspect message\n",
		"[ERR] memberlist: Failed to send\n",
		"[INFO] memberlist: Marking x as failed\n",
		"[ERR] memberlist: Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:2\n",
		"[ERR] memberlist: failed to receive: encryption is configured but remote state is not encrypted from=127.0.0.1:3\n",
		"[ERR] memberlist: failed to receive: no installed keys could decrypt the message from=127.0.0.1:4\n",
		"no prefix at all",
		"[unterminated",
	} {
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Errorf("Write(%q) = %d, %v", line, n, err)
		}
	}
	if got := promtest.ToFloat64(refused); got != 3 {
		t.Errorf("refused = %v after three refusal lines, want 3", got)
	}
	got := logs.All()
	want := []struct {
		level zap.AtomicLevel
		msg   string
	}{
		{zap.NewAtomicLevelAt(zap.DebugLevel), "Stream connection from=127.0.0.1:1"},
		{zap.NewAtomicLevelAt(zap.WarnLevel), "Refuting a suspect message"},
		{zap.NewAtomicLevelAt(zap.ErrorLevel), "Failed to send"},
		{zap.NewAtomicLevelAt(zap.InfoLevel), "Marking x as failed"},
		{zap.NewAtomicLevelAt(zap.ErrorLevel), "Decrypt packet failed: no installed keys could decrypt the message from=127.0.0.1:2"},
		{zap.NewAtomicLevelAt(zap.ErrorLevel), "failed to receive: encryption is configured but remote state is not encrypted from=127.0.0.1:3"},
		{zap.NewAtomicLevelAt(zap.ErrorLevel), "failed to receive: no installed keys could decrypt the message from=127.0.0.1:4"},
		{zap.NewAtomicLevelAt(zap.InfoLevel), "no prefix at all"},
		{zap.NewAtomicLevelAt(zap.InfoLevel), "[unterminated"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i, e := range got {
		if e.Level != want[i].level.Level() || e.Message != want[i].msg {
			t.Errorf("entry %d = %v %q, want %v %q", i, e.Level, e.Message, want[i].level.Level(), want[i].msg)
		}
	}
}
