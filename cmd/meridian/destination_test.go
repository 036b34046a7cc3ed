package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// freeAddr returns a loopback address no one listens on (a port just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDestinationReportsManifestErrors runs `meridian destination --source dir:` on a
// directory with one good and one broken file: it serves (ready) and says what is wrong in
// /ready's warnings and in the manifest_errors gauge.
func TestDestinationReportsManifestErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../../deploy/examples/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := freeAddr(t)
	testutil.Go(t, "meridian destination", func(ctx context.Context) error {
		return runDestination(ctx, []string{"--source", "dir:" + dir, "--addr", "127.0.0.1:0", "--admin-addr", admin, "--log-level", "error", "--plaintext"})
	})
	var body string
	testutil.Eventually(t, 20*time.Second, "/ready to answer 200", func() bool {
		var code int
		code, body = get(t, "http://"+admin+"/ready")
		return code == http.StatusOK
	})
	if !strings.Contains(body, "warnings:") || !strings.Contains(body, "bad.yaml:3:") {
		t.Errorf("/ready = %q, want a warning naming bad.yaml:3", body)
	}
	_, metrics := get(t, "http://"+admin+"/metrics")
	if want := `manifest_errors{file="` + filepath.Join(dir, "bad.yaml") + `"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestDestinationRingNeedsGossipKey: `meridian destination --join X` (or --ring) without a
// gossip key exits with an error that says what to give, a usage error (2); conflicting key
// flags too. A key directory without the primary key is found when it is read (1).
func TestDestinationRingNeedsGossipKey(t *testing.T) {
	dir := t.TempDir()
	key := writeGossipKey(t, dir, "gossip.key", 'a')
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--join", "127.0.0.1:7946"}, 2, "--ring/--join need a gossip key: give --gossip-key-file FILE or --gossip-keys-dir DIR"},
		{[]string{"--ring"}, 2, "--insecure-gossip allows plaintext gossip"},
		{[]string{"--ring-cold-start-wait", "-1s"}, 2, "want 0 or more"},
		{[]string{"--ring-expect-replicas", "-1"}, 2, "want 0 or more"},
		{[]string{"--ring", "--insecure-gossip", "--gossip-key-file", key}, 2, "choose one"},
		{[]string{"--ring", "--gossip-key-file", key, "--gossip-keys-dir", dir}, 2, "give one"},
		{[]string{"--ring", "--gossip-keys-dir", t.TempDir()}, 1, "has no gossip.key (the primary key)"},
	} {
		args := append([]string{"destination", "--source", "dir:" + dir, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0", "--plaintext"}, tc.args...)
		code, _, errOut := capture(t, args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}

// writeGossipKey writes a base64 key of 32 bytes b to dir/name and returns its path.
func writeGossipKey(t *testing.T, dir, name string, b byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// metricLine returns the line of /metrics at admin that starts with name (and a space).
func metricLine(t *testing.T, admin, name string) string {
	t.Helper()
	_, body := get(t, "http://"+admin+"/metrics")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// startDestination runs `meridian destination` with args until the test ends and waits for
// its /ready; it returns the admin address.
func startDestination(t *testing.T, src string, args ...string) string {
	t.Helper()
	admin := freeAddr(t)
	testutil.Go(t, "meridian destination", func(ctx context.Context) error {
		return runDestination(ctx, append([]string{"--source", "dir:" + src, "--admin-addr", admin, "--log-level", "error"}, args...))
	})
	testutil.Eventually(t, 30*time.Second, "/ready to answer 200", func() bool {
		code, _ := get(t, "http://"+admin+"/ready")
		return code == http.StatusOK
	})
	return admin
}

// TestDestinationInsecureGossip: --insecure-gossip runs a ring in plaintext, and says so: a
// warning in the log at start, in /ready and in ring_insecure_gossip; and so does --plaintext
// (gRPC), in the log and in /ready.
func TestDestinationInsecureGossip(t *testing.T) {
	logFile, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	// The logger writes to os.Stderr as it is when the command builds it.
	oldStderr := os.Stderr
	os.Stderr = logFile
	admin := freeAddr(t)
	testutil.Go(t, "meridian destination", func(ctx context.Context) error {
		return runDestination(ctx, []string{"--source", "dir:" + t.TempDir(), "--addr", "127.0.0.1:0", "--admin-addr", admin,
			"--ring", "--ring-expect-replicas", "1", "--insecure-gossip", "--gossip-addr", "127.0.0.1:0", "--log-level", "warn", "--plaintext"})
	})
	var body string
	testutil.Eventually(t, 30*time.Second, "/ready to answer 200", func() bool {
		var code int
		code, body = get(t, "http://"+admin+"/ready")
		return code == http.StatusOK
	})
	os.Stderr = oldStderr
	if !strings.Contains(body, "warnings:") || !strings.Contains(body, "gossip is not encrypted (--insecure-gossip)") {
		t.Errorf("/ready = %q, want a warning of plaintext gossip", body)
	}
	if got := metricLine(t, admin, "ring_insecure_gossip"); got != "ring_insecure_gossip 1" {
		t.Errorf("metric line %q, want ring_insecure_gossip 1", got)
	}
	logged, _ := os.ReadFile(logFile.Name())
	if !strings.Contains(string(logged), `"level":"warn"`) || !strings.Contains(string(logged), "gossip is not encrypted") {
		t.Errorf("the log at start = %q, want a warning of plaintext gossip", logged)
	}
	// --plaintext is a warning too, in the log and in /ready.
	const plain = "gRPC is served and called in plaintext (--plaintext)"
	if !strings.Contains(body, "tls: "+plain) {
		t.Errorf("/ready = %q, want a warning of plaintext gRPC", body)
	}
	if !strings.Contains(string(logged), plain) {
		t.Errorf("the log at start = %q, want a warning of plaintext gRPC", logged)
	}
}

// TestDestinationRefusesPlaintextJoiner: a replica without a key (--insecure-gossip) that
// joins a keyed replica is refused: the keyed one's ring stays itself alone and it counts
// the refusals in ring_gossip_refused_total.
func TestDestinationRefusesPlaintextJoiner(t *testing.T) {
	src := t.TempDir()
	gossip := freeAddr(t)
	keyed := startDestination(t, src, "--plaintext", "--addr", "127.0.0.1:0", "--ring", "--ring-expect-replicas", "1", "--gossip-addr", gossip, "--node-name", "keyed",
		"--gossip-key-file", writeGossipKey(t, t.TempDir(), "gossip.key", 'k'))
	testutil.Go(t, "the plaintext joiner", func(ctx context.Context) error {
		return runDestination(ctx, []string{"--source", "dir:" + src, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
			"--join", gossip, "--insecure-gossip", "--gossip-addr", "127.0.0.1:0", "--node-name", "rogue", "--log-level", "error", "--plaintext"})
	})
	testutil.Eventually(t, 30*time.Second, "the keyed replica to count refused gossip", func() bool {
		l := metricLine(t, keyed, "ring_gossip_refused_total")
		return l != "" && l != "ring_gossip_refused_total 0"
	})
	if _, body := get(t, "http://"+keyed+"/ring"); strings.Contains(body, "rogue") {
		t.Errorf("the keyed replica's ring has the plaintext joiner: %s", body)
	}
}

// TestDestinationGossipOnAdvertiseHost: without --gossip-addr, gossip listens on the
// advertised gRPC address's host at port 7946 only, not on every address; and keys from
// --gossip-keys-dir are reloaded when the directory changes.
func TestDestinationGossipOnAdvertiseHost(t *testing.T) {
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.N(250), 1+rand.N(250), 2+rand.N(250))
	const other = "127.0.0.1:7946"
	if l, err := net.Listen("tcp", other); err != nil {
		t.Skipf("%s is taken here by another process: %v", other, err)
	} else {
		l.Close()
	}
	keys := t.TempDir()
	writeGossipKey(t, keys, "gossip.key", 'a')
	admin := startDestination(t, t.TempDir(), "--plaintext", "--addr", host+":0", "--ring", "--ring-expect-replicas", "1", "--gossip-keys-dir", keys)
	c, err := net.DialTimeout("tcp", host+":7946", 5*time.Second)
	if err != nil {
		t.Fatalf("gossip does not listen on %s:7946: %v", host, err)
	}
	c.Close()
	l, err := net.Listen("tcp", other)
	if err != nil {
		t.Fatalf("gossip holds %s too (listening on every address?): %v", other, err)
	}
	l.Close()
	if got := metricLine(t, admin, "ring_gossip_keys"); got != "ring_gossip_keys 1" {
		t.Errorf("metric line %q, want ring_gossip_keys 1", got)
	}
	writeGossipKey(t, keys, "accepted-next.key", 'b')
	testutil.Eventually(t, 30*time.Second, "the accepted key to be installed", func() bool {
		return metricLine(t, admin, "ring_gossip_keys") == "ring_gossip_keys 2"
	})
}

func TestDestinationShardKeyFlag(t *testing.T) {
	args := []string{"destination", "--source", "dir:" + t.TempDir(), "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--plaintext", "--shard-key", "tenant"}
	code, _, errOut := capture(t, args...)
	if code != 2 || !strings.Contains(errOut, `--shard-key: shard key "tenant": want service or namespace`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestDestinationBadAdvertiseAddr: the gossip address defaults to the advertised one's host,
// so a bad --advertise-addr is reported under its own name (it was blamed on --gossip-addr,
// which was not given), as a usage error.
func TestDestinationBadAdvertiseAddr(t *testing.T) {
	args := []string{"destination", "--source", "dir:" + t.TempDir(), "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--plaintext", "--ring", "--insecure-gossip", "--advertise-addr", "nonsense"}
	code, _, errOut := capture(t, args...)
	if code != 2 || !strings.Contains(errOut, `--advertise-addr: gRPC address "nonsense"`) {
		t.Fatalf("exit %d, stderr %q; want 2 naming --advertise-addr", code, errOut)
	}
}

// TestDestinationExpectStatefulSetUnreadable: a replica that cannot read its StatefulSet's
// count (no API server here) still starts: its cold start's wait goes on without a count (a
// lone replica's, 1s here, runs out). TestStandIn covers the read that succeeds.
func TestDestinationExpectStatefulSetUnreadable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	startDestination(t, t.TempDir(), "--plaintext", "--addr", "127.0.0.1:0", "--ring", "--insecure-gossip",
		"--gossip-addr", "127.0.0.1:0", "--ring-expect-statefulset", "linkerd-destination", "--kubeconfig", missing,
		"--ring-cold-start-wait", "1s")
}
