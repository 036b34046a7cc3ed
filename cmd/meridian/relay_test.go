package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// servicesDir writes n Services (relay/svc-0 ...) into a new directory.
func servicesDir(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: relay}\nspec: {ports: [{port: 80}]}\n---\n", i)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func svcAuthority(i int) string { return fmt.Sprintf("svc-%d.relay.svc.cluster.local:80", i) }

// TestRelayIsMTLS runs two replicas in one ring: a, which relays streams for services it does
// not own (--non-owner forward), and b, which serves what it owns and redirects the rest. a's
// relays to b are mTLS with a's certificate, and a accepts b only as a destination replica: a
// stream for one of b's services reaches a client through a when b proves the destination
// identity, and does not when b holds the gossip key but a certificate of another identity.
func TestRelayIsMTLS(t *testing.T) {
	m := startIdentity(t)
	const n = 24
	src := servicesDir(t, n)
	web := m.webTLS(t)
	key := writeGossipKey(t, t.TempDir(), "gossip.key", 'r')
	for _, c := range []struct {
		name, ownerSA, ownerID string
		relayed                bool
	}{
		{"to a destination replica", "linkerd-destination", dstID, true},
		{"to a peer of another identity", "rogue", rogueID, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			aAddr, bAddr, aGossip := freeAddr(t), freeAddr(t), freeAddr(t)
			aAdmin := startDestination(t, src, append(m.serverArgs(t, "linkerd-destination"), "--addr", aAddr, "--ring", "--ring-expect-replicas", "1", "--gossip-addr", aGossip,
				"--gossip-key-file", key, "--node-name", "a", "--non-owner", "forward")...)
			bAdmin := startDestination(t, src, append(m.serverArgs(t, c.ownerSA), "--identity-name", c.ownerID, "--addr", bAddr, "--join", aGossip,
				"--gossip-addr", freeAddr(t), "--gossip-key-file", key, "--node-name", "b", "--non-owner", "redirect")...)
			for _, admin := range []string{aAdmin, bAdmin} {
				testutil.Eventually(t, 30*time.Second, "a ring of a and b at "+admin, func() bool {
					_, body := get(t, "http://"+admin+"/ring")
					return strings.Contains(body, `"name":"a"`) && strings.Contains(body, `"name":"b"`)
				})
			}
			toA := testutil.DialGRPC(t, aAddr, mtls(web, dstID))
			toB := testutil.DialGRPC(t, bAddr, mtls(web, c.ownerID))
			// b's services: those it answers itself (it redirects the others to a).
			var ofB, ofA []int
			testutil.EventuallyNoError(t, 30*time.Second, "b to serve its share and redirect the rest", func() error {
				ofB, ofA = nil, nil
				for i := range n {
					_, err := getOnce(toB, svcAuthority(i))
					switch status.Code(err) {
					case codes.OK:
						ofB = append(ofB, i)
					case codes.FailedPrecondition:
						ofA = append(ofA, i)
					default:
						return fmt.Errorf("%s from b: %v", svcAuthority(i), err)
					}
				}
				if len(ofB) == 0 || len(ofA) == 0 {
					return fmt.Errorf("b owns %d of %d services", len(ofB), n)
				}
				return nil
			})
			for _, i := range ofA {
				if _, err := getOnce(toA, svcAuthority(i)); err != nil {
					t.Errorf("%s, a's own, from a: %v", svcAuthority(i), err)
				}
			}
			for k, i := range ofB {
				if c.relayed {
					if _, err := getOnce(toA, svcAuthority(i)); err != nil {
						t.Errorf("%s, b's, relayed by a: %v", svcAuthority(i), err)
					}
				} else if k < 3 { // each waits for its deadline
					if _, err := getWithin(toA, svcAuthority(i), time.Second); err == nil {
						t.Errorf("%s, b's, relayed by a to a peer that is not a destination replica", svcAuthority(i))
					}
				}
			}
			if got := metricLine(t, aAdmin, "destination_forwarded_streams_total"); got == "" || got == "destination_forwarded_streams_total 0" {
				t.Errorf("a relayed nothing: %q", got)
			}
		})
	}
}
