package origdst

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"golang.org/x/sys/unix"
)

// netns is a network namespace the test created, with its loopback up.
type netns struct{ name string }

func newNetns(t *testing.T, tools ...string) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	ns := &netns{name: fmt.Sprintf("meridian-origdst-%d", os.Getpid())}
	if out, err := exec.Command("ip", "netns", "add", ns.name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns.name).Run() })
	ns.run(t, "ip", "link", "set", "lo", "up")
	return ns
}

func (ns *netns) run(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.name}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", args, err, out)
	}
}

// do runs f on an OS thread that has entered the namespace; sockets f creates live there.
// The thread is discarded afterwards (its goroutine ends locked).
func (ns *netns) do(t *testing.T, f func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fd, err := unix.Open("/var/run/netns/"+ns.name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		f()
		errc <- nil
	}()
	if err := testutil.Recv(t, errc, testutil.StopWithin, "the namespace thread"); err != nil {
		t.Fatalf("enter %s: %v", ns.name, err)
	}
}

// TestRedirected: behind an iptables REDIRECT in a namespace of its own, the connection's
// original destination is the address the client dialled, for IPv4 and IPv6.
func TestRedirected(t *testing.T) {
	for _, tc := range []struct{ family, iptables, loopback string }{
		{"ipv4", "iptables", "127.0.0.1"},
		{"ipv6", "ip6tables", "::1"},
	} {
		t.Run(tc.family, func(t *testing.T) {
			ns := newNetns(t, tc.iptables)
			var lis net.Listener
			var err error
			ns.do(t, func() { lis, err = net.Listen("tcp", net.JoinHostPort(tc.loopback, "0")) })
			if err != nil {
				t.Skipf("listen on %s in the namespace: %v", tc.loopback, err)
			}
			defer lis.Close()
			port := lis.Addr().(*net.TCPAddr).Port
			ns.run(t, tc.iptables, "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", tc.loopback,
				"--dport", "9999", "-j", "REDIRECT", "--to-ports", strconv.Itoa(port))
			server, _ := accept(t, lis, func() (c net.Conn, err error) {
				ns.do(t, func() { c, err = net.Dial("tcp", net.JoinHostPort(tc.loopback, "9999")) })
				return c, err
			})
			got, err := OriginalDst(server)
			want := netip.AddrPortFrom(netip.MustParseAddr(tc.loopback), 9999)
			if err != nil || got != want {
				t.Fatalf("OriginalDst = %v, %v; want %v", got, err, want)
			}
		})
	}
}
