package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// silentServer accepts TCP connections and never answers on them (it holds them until the
// test ends): a server that is up but hung.
func silentServer(t *testing.T) string {
	t.Helper()
	lis := testutil.Listen(t)
	var mu sync.Mutex
	var conns []net.Conn
	testutil.Go(t, "the silent server", func(ctx context.Context) error {
		go func() { <-ctx.Done(); lis.Close() }()
		for {
			c, err := lis.Accept()
			if err != nil {
				mu.Lock()
				for _, c := range conns {
					c.Close()
				}
				mu.Unlock()
				return nil
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	return lis.Addr().String()
}

// captureWithin is capture with a deadline: the command must end within d.
func captureWithin(t *testing.T, d time.Duration, args ...string) (code int, out, errOut string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := capture(t, args...)
		done <- result{c, o, e}
	}()
	r := testutil.Recv(t, done, d, "meridian "+strings.Join(args, " ")+" to end")
	return r.code, r.out, r.err
}

// TestEndpointsTimeoutCoversConnecting: against a server that accepts connections and never
// answers, `meridian endpoints --timeout 1s` gives up after its timeout (gRPC's own connect
// timeout is 20 s) and says so.
func TestEndpointsTimeoutCoversConnecting(t *testing.T) {
	addr := silentServer(t)
	code, _, errOut := captureWithin(t, 15*time.Second, "endpoints", "--addr", addr, "--timeout", "1s", "web.shop.svc.cluster.local:80")
	if code != 1 || !strings.Contains(errOut, "web.shop.svc.cluster.local:80 from "+addr+": no answer within 1s") {
		t.Errorf("exit %d, stderr %q; want 1 and no answer within 1s", code, errOut)
	}
}

// TestRingSaysWhy: `meridian ring` shows the replica's reason when it has no ring, and says
// what is wrong when pointed at a gRPC port instead of printing the bytes it got.
func TestRingSaysWhy(t *testing.T) {
	grpcAddr, admin := freeAddr(t), freeAddr(t)
	testutil.Go(t, "meridian destination", func(ctx context.Context) error {
		return runDestination(ctx, []string{"--source", "dir:../../deploy/examples", "--addr", grpcAddr, "--admin-addr", admin, "--log-level", "error", "--plaintext"})
	})
	testutil.Eventually(t, 20*time.Second, "the admin port to answer", func() bool {
		code, _ := get(t, "http://"+admin+"/live")
		return code == 200
	})
	code, _, errOut := captureWithin(t, 15*time.Second, "ring", "--addr", admin)
	if code != 1 || !strings.Contains(errOut, `404 Not Found: "this replica runs without a ring"`) {
		t.Errorf("ring without a ring: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = captureWithin(t, 15*time.Second, "ring", "--addr", grpcAddr)
	if code != 1 || !strings.Contains(errOut, "this is the gRPC port; use the admin address") || strings.Contains(errOut, `\x00`) {
		t.Errorf("ring at the gRPC port: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = captureWithin(t, 15*time.Second, "ring", "--addr", silentServerHTTP1Garbage(t))
	if code != 1 || !strings.Contains(errOut, "does not answer in HTTP/1") || strings.Contains(errOut, "malformed") {
		t.Errorf("ring at a non-HTTP port: exit %d, stderr %q", code, errOut)
	}
}

// TestRingTimeoutAndArguments: `meridian ring --timeout` bounds the wait for a replica that
// accepts and never answers (it was a fixed 10 s), and says so in words; a stray argument or
// a non-positive timeout is a usage error (the argument was ignored).
func TestRingTimeoutAndArguments(t *testing.T) {
	addr := silentServer(t)
	code, _, errOut := captureWithin(t, 8*time.Second, "ring", "--addr", addr, "--timeout", "500ms")
	if code != 1 || !strings.Contains(errOut, addr+": no answer within 500ms") {
		t.Errorf("a silent replica: exit %d, stderr %q; want 1 and no answer within 500ms", code, errOut)
	}
	for _, args := range [][]string{{"ring", "--addr", addr, "extra"}, {"ring", "--timeout", "0s"}} {
		if code, _, errOut := capture(t, args...); code != 2 {
			t.Errorf("meridian %s: exit %d, stderr %q; want 2", strings.Join(args, " "), code, errOut)
		}
	}
}

// silentServerHTTP1Garbage answers every connection with bytes that are not HTTP, then closes it.
func silentServerHTTP1Garbage(t *testing.T) string {
	t.Helper()
	lis := testutil.Listen(t)
	testutil.Go(t, "the garbage server", func(ctx context.Context) error {
		go func() { <-ctx.Done(); lis.Close() }()
		for {
			c, err := lis.Accept()
			if err != nil {
				return nil
			}
			_, _ = c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02"))
			c.Close()
		}
	})
	return lis.Addr().String()
}

// TestIdentityTokenRefusesNonPositiveTTL: a token that would be born expired is refused.
func TestIdentityTokenRefusesNonPositiveTTL(t *testing.T) {
	dir := t.TempDir()
	if code, _, errOut := capture(t, "identity", "init", "--out", dir, "--local-token-key"); code != 0 {
		t.Fatalf("identity init: %d %s", code, errOut)
	}
	key := filepath.Join(dir, identity.FileLocalTokenKey)
	for _, ttl := range []string{"-1h", "0s"} {
		code, out, errOut := capture(t, "identity", "token", "--key", key, "--ttl", ttl)
		if code != 2 || out != "" || !strings.Contains(errOut, "--ttl") || !strings.Contains(errOut, "want a positive lifetime") {
			t.Errorf("--ttl %s: exit %d, stdout %q, stderr %q; want 2 and a refusal", ttl, code, out, errOut)
		}
	}
	if code, out, errOut := capture(t, "identity", "token", "--key", key, "--ttl", "1h"); code != 0 || strings.Count(out, ".") != 2 {
		t.Errorf("--ttl 1h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestIdentityCertifyErrors runs `meridian identity certify` against a real identity server
// (TLS, and one started with --plaintext) and a hung one: it succeeds with a good token,
// stops at once with the reason when the token has expired, the answer does not verify or the
// server's TLS certificate does not, and says plainly when nothing answered; it never points
// at warnings it did not print.
func TestIdentityCertifyErrors(t *testing.T) {
	dir := t.TempDir()
	issuer := filepath.Join(dir, "issuer")
	if code, _, errOut := capture(t, "identity", "init", "--out", issuer, "--local-token-key"); code != 0 {
		t.Fatalf("identity init: %d %s", code, errOut)
	}
	other := filepath.Join(dir, "other")
	if code, _, errOut := capture(t, "identity", "init", "--out", other); code != 0 {
		t.Fatalf("identity init: %d %s", code, errOut)
	}
	anchors, otherAnchors := filepath.Join(issuer, identity.FileTrustAnchors), filepath.Join(other, identity.FileTrustAnchors)
	addr, plainAddr := freeAddr(t), freeAddr(t)
	for _, srv := range []struct {
		addr  string
		extra []string
	}{{addr, nil}, {plainAddr, []string{"--plaintext"}}} {
		testutil.Go(t, "meridian identity "+strings.Join(srv.extra, " "), func(ctx context.Context) error {
			return runIdentityServer(ctx, append([]string{"--issuer-dir", issuer, "--tokens", "local", "--local-token-key", filepath.Join(issuer, identity.FileLocalTokenKey),
				"--addr", srv.addr, "--admin-addr", "127.0.0.1:0", "--log-level", "error"}, srv.extra...))
		})
	}
	keyPEM, err := os.ReadFile(filepath.Join(issuer, identity.FileLocalTokenKey))
	if err != nil {
		t.Fatal(err)
	}
	key, err := identity.ParseLocalTokenKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	writeToken := func(name string, from time.Time) string {
		tok, err := identity.MintLocalToken(key, "default", "web", identity.Audience, from, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, tok, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, expired := writeToken("good", time.Now()), writeToken("expired", time.Now().Add(-2*time.Hour))
	id := identity.ServiceAccountIdentity("default", "web", "linkerd", "cluster.local")
	certify := func(addr, token string, extra ...string) (int, string, string) {
		// --timeout is long: the permanent failures must not wait for it.
		args := append([]string{"identity", "certify", "--addr", addr, "--identity", id, "--token", token, "--timeout", "60s", "--trust-anchors", anchors}, extra...)
		return captureWithin(t, 30*time.Second, args...)
	}
	for _, a := range []struct {
		addr  string
		extra []string
	}{{addr, nil}, {plainAddr, []string{"--plaintext"}}} {
		testutil.EventuallyNoError(t, 20*time.Second, "the identity service at "+a.addr+" to certify", func() error {
			code, out, errOut := certify(a.addr, good, a.extra...)
			if code != 0 || !strings.Contains(out, "DNS SANs:   "+id) || !strings.Contains(out, "verified against trust anchors: true") {
				return &cliError{code, out, errOut}
			}
			return nil
		})
	}
	for _, c := range []struct {
		name          string
		addr, token   string
		extra         []string
		want, wantNot string
	}{
		{"expired token", addr, expired, nil,
			addr + ": the identity service refused the request (Unauthenticated): invalid token: token has expired", "retrying"},
		{"untrusted answer", plainAddr, good, []string{"--plaintext", "--trust-anchors", otherAnchors},
			plainAddr + ": the answer was refused: response certificate does not verify against the trust anchors", "retrying"},
		{"untrusted server", addr, good, []string{"--trust-anchors", otherAnchors},
			addr + ": the identity service's TLS certificate was refused (check --trust-anchors and --identity-svc-name)", "retrying"},
		{"server of another name", addr, good, []string{"--identity-svc-name", "rogue.linkerd.serviceaccount.identity.linkerd.cluster.local"},
			"the identity service's TLS certificate was refused", "retrying"},
		{"wrong identity", addr, good, []string{"--identity", "db.default.serviceaccount.identity.linkerd.cluster.local"},
			"refused the request (FailedPrecondition)", "retrying"},
	} {
		code, _, errOut := certify(c.addr, c.token, c.extra...)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, c.wantNot) || strings.Contains(errOut, "see the warnings above") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q without %q", c.name, code, errOut, c.want, c.wantNot)
		}
	}
	hung := silentServer(t)
	code, _, errOut := captureWithin(t, 30*time.Second, "identity", "certify", "--addr", hung, "--identity", id, "--token", good, "--trust-anchors", anchors, "--timeout", "1s")
	if code != 1 || !strings.Contains(errOut, "no answer from "+hung+" within 1s") || strings.Contains(errOut, "see the warnings above") {
		t.Errorf("a hung server: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = captureWithin(t, 30*time.Second, "identity", "certify", "--addr", freeAddr(t), "--identity", id, "--token", good, "--trust-anchors", anchors, "--timeout", "2s")
	if code != 1 || !strings.Contains(errOut, "attempt 1: ") || !strings.Contains(errOut, "the last attempt failed: ") {
		t.Errorf("nothing listening: exit %d, stderr %q; want the retried attempts and the last error", code, errOut)
	}
	code, _, errOut = certify(addr, filepath.Join(dir, "missing"))
	if code != 1 || !strings.Contains(errOut, "read token") {
		t.Errorf("a missing token file: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = captureWithin(t, 30*time.Second, "identity", "certify", "--addr", addr, "--identity", id, "--token", good)
	if code != 2 || !strings.Contains(errOut, "give --trust-anchors FILE") {
		t.Errorf("TLS without trust anchors: exit %d, stderr %q; want 2 and what to give", code, errOut)
	}
}

type cliError struct {
	code        int
	out, errOut string
}

func (e *cliError) Error() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", e.code, e.out, e.errOut)
}

// TestIdentityInitForceKeepsKeysPrivate: --force over an existing file that others could read
// leaves the trust anchor's key readable by its owner only.
func TestIdentityInitForceKeepsKeysPrivate(t *testing.T) {
	dir := t.TempDir()
	keyOut := filepath.Join(dir, "anchor.key")
	if err := os.WriteFile(keyOut, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyOut, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if code, _, errOut := capture(t, "identity", "init", "--out", filepath.Join(dir, "issuer"), "--anchor-key-out", keyOut, "--force"); code != 0 {
		t.Fatalf("identity init: %d %s", code, errOut)
	}
	st, err := os.Stat(keyOut)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() <= 3 {
		t.Errorf("the anchor key: mode %v, %d bytes; want 0600 and the new key", st.Mode().Perm(), st.Size())
	}
}

// TestBadValuesRefusedEarly: values that would make broken objects are usage errors naming
// their flag, before anything is generated or printed: a trust domain or namespace that is
// not a DNS name (it ends up in every identity, in certificates and in object names), and
// an iptables mode proxy-init does not know, which --dry-run accepted. identity's stray
// arguments and bad flag values are usage errors too (they exited 1).
func TestBadValuesRefusedEarly(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"identity", "init", "--trust-domain", "bad domain!"}, `--trust-domain "bad domain!"`},
		{[]string{"identity", "init", "--control-plane-namespace", "Linkerd"}, `--control-plane-namespace "Linkerd"`},
		{[]string{"install", "--ignore-cluster", "--namespace", "Bad NS"}, `--namespace "Bad NS"`},
		{[]string{"install", "--ignore-cluster", "--set", "identityTrustDomain=Bad_Domain"}, `identityTrustDomain "Bad_Domain"`},
		{[]string{"proxy-init", "--dry-run", "--iptables-mode", "foo"}, `--iptables-mode: iptables mode "foo"`},
		{[]string{"identity", "extra"}, `unexpected arguments ["extra"] (subcommands: init, token, certify)`},
		{[]string{"identity", "--lifetime", "0s"}, "certificate lifetime 0s must be positive"},
	} {
		code, out, errOut := capture(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("meridian %s: exit %d, stdout %.80q, stderr %q; want 2, nothing printed, and %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
	if code, out, errOut := capture(t, "identity", "init", "--trust-domain", "example.org", "--control-plane-namespace", "mesh"); code != 0 || !strings.Contains(out, "identityTrustAnchorsPEM") {
		t.Errorf("good names: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := capture(t, "proxy-init", "--dry-run", "--iptables-mode", "nft"); code != 0 || !strings.Contains(out, "PROXY_INIT_REDIRECT") {
		t.Errorf("proxy-init --dry-run: exit %d, stdout %q, stderr %q; want the rules on stdout", code, out, errOut)
	}
}

// TestUsageErrorsCutShort: a flag value, an extra argument or a command of 100,000 bytes is
// named in a short usage error (the flag package quotes a bad value whole).
func TestUsageErrorsCutShort(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	flags := func() *flag.FlagSet {
		fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
		fs.SetOutput(io.Discard) // as the commands' own
		fs.Int("n", 0, "a number")
		return fs
	}
	for name, err := range map[string]error{
		"flag value":     parseFlags(flags(), []string{"-n", long}),
		"extra argument": parseNoArgs(flags(), []string{long}),
	} {
		if !errors.Is(err, errUsage) || len(err.Error()) > 512 {
			t.Errorf("%s: %d bytes: %.200v", name, len(fmt.Sprint(err)), err)
		}
	}
	if err := parseFlags(flags(), []string{"-n", long}); !strings.Contains(fmt.Sprint(err), "for flag -n: parse error") {
		t.Errorf("the flag's name and reason are cut off: %.400v", err)
	}
	if code, _, errOut := capture(t, long); code != 2 || !strings.Contains(errOut, "unknown command") || strings.Contains(errOut, long[:1000]) {
		t.Errorf("long command: exit %d, %d bytes of stderr", code, len(errOut))
	}
}
