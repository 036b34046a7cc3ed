//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// requireNetns skips t unless this process can create network namespaces and run ip and
// iptables; under CI (MERIDIAN_REQUIRE_KUBE=1, where .ci/run installs iproute2 and iptables
// and runs as root) it fails instead.
func requireNetns(t *testing.T) {
	t.Helper()
	missing := func(why string) {
		if kubetest.Required() {
			t.Fatalf("%s (MERIDIAN_REQUIRE_KUBE is set: the network-namespace test must run)", why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		missing("needs root to create network namespaces")
	}
	for _, tool := range []string{"ip", "iptables-save", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(tool + " is not installed (apt-get install -y iproute2 iptables)")
		}
	}
}

// netns is a network namespace the test created (removed when it ends), with lo up.
type netns struct {
	t    *testing.T
	name string
}

func newNetns(t *testing.T, tag string) *netns {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := &netns{t: t, name: "mrd-e2e-" + tag + "-" + hex.EncodeToString(b[:])}
	runCmd(t, "ip", "netns", "add", n.name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	n.run("ip", "link", "set", "lo", "up")
	return n
}

func runCmd(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// run runs a command in the namespace.
func (n *netns) run(argv ...string) {
	n.t.Helper()
	runCmd(n.t, append([]string{"ip", "netns", "exec", n.name}, argv...)...)
}

// do runs fn on an OS thread that entered the namespace: sockets fn creates live there,
// and so do processes it starts. The thread is never handed back to the scheduler; it
// exits with its goroutine, when fn returns.
func (n *netns) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := enter(n.name); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return testutil.Recv(n.t, errc, within, "the work in netns "+n.name)
}

// listen listens on addr in the namespace until the test ends.
func (n *netns) listen(addr string) net.Listener {
	n.t.Helper()
	var lis net.Listener
	if err := n.do(func() (err error) { lis, err = net.Listen("tcp", addr); return err }); err != nil {
		n.t.Fatalf("listen on %s in %s: %v", addr, n.name, err)
	}
	n.t.Cleanup(func() { _ = lis.Close() })
	return lis
}

// dial connects to addr from the namespace (as root: not the proxy's uid, so the namespace's
// iptables rules apply).
func (n *netns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// link joins namespaces a and b with a veth pair, addresses aIP and bIP (CIDR) on its ends.
func link(t *testing.T, a *netns, aIP string, b *netns, bIP string) {
	t.Helper()
	var r [3]byte
	_, _ = rand.Read(r[:])
	va, vb := "ve"+hex.EncodeToString(r[:])+"a", "ve"+hex.EncodeToString(r[:])+"b"
	runCmd(t, "ip", "link", "add", va, "netns", a.name, "type", "veth", "peer", "name", vb, "netns", b.name)
	a.run("ip", "addr", "add", aIP, "dev", va)
	a.run("ip", "link", "set", va, "up")
	b.run("ip", "addr", "add", bIP, "dev", vb)
	b.run("ip", "link", "set", vb, "up")
}
