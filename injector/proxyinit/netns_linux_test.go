//go:build linux

package proxyinit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"golang.org/x/sys/unix"
)

// requireNetns skips unless this process can create network namespaces and run iptables.
func requireNetns(t *testing.T) Binaries {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("`ip` (iproute2) not installed")
	}
	bins, _ := BinariesFor("")
	for _, b := range []string{bins.Save, bins.Restore} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not installed (apt-get install -y iptables); skipping the real-iptables test", b)
		}
	}
	return bins
}

// inNetns runs fn on an OS thread switched into the named namespace (optionally with the
// thread's fsuid changed, so sockets it creates belong to that user). The thread is never
// returned to the scheduler: it exits with the goroutine.
func inNetns(t *testing.T, name string, fsuid int, fn func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		f, err := os.Open("/var/run/netns/" + name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		if fsuid >= 0 {
			unix.Setfsuid(fsuid) // this thread only
		}
		errc <- fn()
	}()
	return testutil.Recv(t, errc, 20*time.Second, "the work in netns "+name)
}

// originalDst reads SO_ORIGINAL_DST from a redirected connection.
func originalDst(c net.Conn) (string, error) {
	sc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return "", err
	}
	var addr string
	var gerr error
	err = sc.Control(func(fd uintptr) {
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			gerr = err
			return
		}
		port := binary.BigEndian.Uint16(m.Multiaddr[2:4])
		ip := net.IPv4(m.Multiaddr[4], m.Multiaddr[5], m.Multiaddr[6], m.Multiaddr[7])
		addr = fmt.Sprintf("%s:%d", ip, port)
	})
	if err != nil {
		return "", err
	}
	return addr, gerr
}

// acceptOne accepts one connection within the deadline and reports where it was headed.
func acceptOne(t *testing.T, l net.Listener) (local, orig string) {
	t.Helper()
	_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("accept on %s: %v", l.Addr(), err)
	}
	defer c.Close()
	o, err := originalDst(c)
	if err != nil {
		o = "none: " + err.Error()
	}
	return c.LocalAddr().String(), o
}

func listen(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	if err := inNetns(t, ns, -1, func() (err error) { l, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, ns string, uid int, addr string) {
	t.Helper()
	err := inNetns(t, ns, uid, func() error {
		c, err := net.DialTimeout("tcp4", addr, 10*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		t.Fatalf("dial %s from %s as uid %d: %v", addr, ns, uid, err)
	}
}

// TestApplyInNetns applies the rules for real in a pod-like network namespace wired by a
// veth pair to a "remote" namespace, reads them back with iptables-save, and checks that
// traffic goes where the rules say: the app's outbound to the outbound port, the proxy's
// own outbound (its uid) and skipped ports straight out, inbound to the inbound port,
// skipped inbound ports straight to the app.
func TestApplyInNetns(t *testing.T) {
	bins := requireNetns(t)
	pod := testutil.NewNetns(t, "pod")
	remote := testutil.NewNetns(t, "rem")
	testutil.LinkNetns(t, pod, "10.99.0.1/24", remote, "10.99.0.2/24")

	c := DefaultConfig()
	c.OutboundPortsToIgnore = []string{"5432"}
	c.InboundPortsToIgnore = append(c.InboundPortsToIgnore, "9000-9001")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := ExecRunner{Prefix: []string{"ip", "netns", "exec", pod}}
	res, err := Apply(ctx, c, bins, r)
	if err != nil {
		t.Fatal(err)
	}
	if res.AlreadyConfigured {
		t.Fatal("fresh namespace reported as already configured")
	}
	t.Logf("iptables-save -t nat after apply:\n%s", res.After)
	checkOrder(t, res.After, c)

	// Idempotent: a restarted init container changes nothing.
	again, err := Apply(ctx, c, bins, r)
	if err != nil || !again.AlreadyConfigured {
		t.Fatalf("second Apply: %+v %v", again.AlreadyConfigured, err)
	}
	if again.After != res.After {
		t.Error("second Apply changed the rules")
	}

	outbound := listen(t, pod, "0.0.0.0:4140")
	inbound := listen(t, pod, "0.0.0.0:4143")
	appSkipped := listen(t, pod, "10.99.0.1:9000")
	remoteHTTP := listen(t, remote, "10.99.0.2:80")
	remoteDB := listen(t, remote, "10.99.0.2:5432")

	for _, tc := range []struct {
		name     string
		from     string // the namespace dialling
		uid      int    // the dialler's fsuid, -1 for root
		to       string
		lis      net.Listener
		redirect string // the port suffix the connection is redirected to; "" when it must arrive as dialled
	}{
		{"app outbound is redirected to 4140", pod, -1, "10.99.0.2:80", outbound, ":4140"},
		{"proxy uid bypasses the redirect", pod, int(c.ProxyUID), "10.99.0.2:80", remoteHTTP, ""},
		{"skipped outbound port goes straight out", pod, -1, "10.99.0.2:5432", remoteDB, ""},
		{"inbound is redirected to 4143", remote, -1, "10.99.0.1:8080", inbound, ":4143"},
		{"skipped inbound port reaches the app", remote, -1, "10.99.0.1:9000", appSkipped, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial(t, tc.from, tc.uid, tc.to)
			local, orig := acceptOne(t, tc.lis)
			if tc.redirect != "" && (!strings.HasSuffix(local, tc.redirect) || orig != tc.to) {
				t.Fatalf("accepted on %s, original destination %s; want port %s, original destination %s", local, orig, tc.redirect, tc.to)
			}
			if tc.redirect == "" && local != tc.to {
				t.Fatalf("accepted on %s, want %s", local, tc.to)
			}
		})
	}
}

// TestApplyReportsRestoreFailure checks that a failing iptables-restore surfaces its error.
func TestApplyReportsRestoreFailure(t *testing.T) {
	f := fakeRunner{fail: "iptables-restore"}
	_, err := Apply(context.Background(), DefaultConfig(), Binaries{Save: "iptables-save", Restore: "iptables-restore"}, &f)
	if err == nil || !strings.Contains(err.Error(), "apply rules") {
		t.Fatalf("err %v", err)
	}
}

type fakeRunner struct{ fail string }

func (f *fakeRunner) Run(_ context.Context, _ []byte, name string, _ ...string) ([]byte, error) {
	if name == f.fail {
		return nil, errors.New("exit status 2: iptables-restore: line 3 failed")
	}
	return []byte("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"), nil
}
