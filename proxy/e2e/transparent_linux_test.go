//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

// proxyUID is the uid the proxies run as: proxy-init's rules let its traffic out unredirected.
const proxyUID = 2102

// The same flow as on loopback, transparently: the client application knows nothing of the
// mesh. Then the same request addressed by the pod's IP alone, and opaque TCP to a cluster
// IP: both resolved by the address (GetProfile by IP), both mTLS. Three namespaces: the control plane's (in process, its listeners moved there), a
// client pod's and a server pod's, each pod joined to the control plane's by a veth pair
// (which forwards between them), each pod behind `meridian proxy-init`'s iptables rules with
// a `meridian proxy` process running as the proxy's uid. The client dials web's cluster IP;
// its connection is redirected to its proxy's 4140 (SO_ORIGINAL_DST), routed by the Host
// (web's name), sent over mTLS to the server pod's IP and port, redirected there to the
// server proxy's 4143 (SO_ORIGINAL_DST again) and handed to the app, which sees the client's
// identity.
func TestTransparentInNetns(t *testing.T) {
	requireNetns(t)
	bin := meridianBinary(t)
	cpNS, clientNS, serverNS := newNetns(t, "cp"), newNetns(t, "cli"), newNetns(t, "srv")
	link(t, cpNS, "10.98.1.1/24", clientNS, "10.98.1.2/24")
	link(t, cpNS, "10.98.2.1/24", serverNS, "10.98.2.2/24")
	clientNS.run("ip", "route", "add", "default", "via", "10.98.1.1")
	serverNS.run("ip", "route", "add", "default", "via", "10.98.2.1")
	cpNS.run("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")

	cl := &cluster{t: t, dir: t.TempDir()}
	clientPod := pod{name: "client-0", app: "client", sa: "client", ip: netip.MustParseAddr("10.98.1.2")}
	web := service{name: "web", port: 80, clusterIP: "10.96.0.10",
		pods: []pod{{name: "web-0", app: "web", sa: "web", ip: netip.MustParseAddr("10.98.2.2"), port: 8080}}}
	cl.service(web)
	// db: a TCP echo on the same pod, on a default opaque port, behind its own cluster IP.
	dbPod := web.pods[0]
	dbPod.port = 5432
	db := service{name: "db", port: 5432, targetPort: 5432, clusterIP: "10.96.0.11", endpoints: []pod{dbPod}}
	cl.service(db)
	cl.write("pod-client.yaml", podYAML(clientPod))
	cp := startControlPlane(t, cl, cpOptions{replicas: 3, transportMode: translator.TransportTransparent,
		listen: func() net.Listener { return cpNS.listen("10.98.1.1:0") }})
	worldReadable(t, cp.tokenDir)

	for _, n := range []*netns{clientNS, serverNS} {
		n.run(bin, "proxy-init")
	}
	startHTTPEcho(t, web.pods[0], serverNS.listen(web.pods[0].appAddr()))
	// On every address, as most servers listen: the inbound proxy forwards a transport
	// header's connection to 127.0.0.1 at the header's port.
	startTCPEcho(t, dbPod, serverNS.listen(fmt.Sprintf("0.0.0.0:%d", dbPod.port)))
	server := startProxyProcess(t, serverNS, bin, cp.proxyEnv(web.pods[0], cp.replicas[0].addr))
	client := startProxyProcess(t, clientNS, bin, cp.proxyEnv(clientPod, cp.replicas[0].addr))
	for _, p := range []*proxyProcess{server, client} {
		testutil.EventuallyNoError(t, within, "proxy in "+p.ns.name+" ready", func() error {
			code, body, err := p.admin("/ready")
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("/ready = %d %q", code, body)
			}
			return err
		})
	}

	app := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: clientNS.dial, DisableKeepAlives: true}}
	reply := transparentGet(t, app, "http://"+web.clusterIP+"/", "web.shop.svc.cluster.local")
	if reply.Pod != "web-0" || reply.ClientID != clientPod.identity() {
		t.Fatalf("the app answered %+v; want web-0 seeing l5d-client-id %s", reply, clientPod.identity())
	}
	t.Logf("reply %+v", reply)
	if !strings.HasPrefix(reply.Remote, "10.98.2.2:") {
		t.Errorf("the app was called from %s, want its own proxy (10.98.2.2)", reply.Remote)
	}
	testutil.EventuallyNoError(t, within, "the proxies' metrics", func() error {
		in := map[string]string{"direction": "inbound", "tls": "true", "client_id": clientPod.identity()}
		if n, err := server.metric("request_total", in); err != nil || n < 1 {
			return fmt.Errorf("server proxy: request_total%v = %v (%v)", in, n, err)
		}
		out := map[string]string{"direction": "outbound", "tls": "true", "server_id": web.pods[0].identity(), "status_code": "200"}
		if n, err := client.metric("response_total", out); err != nil || n < 1 {
			return fmt.Errorf("client proxy: response_total%v = %v (%v)", out, n, err)
		}
		return nil
	})

	// Addressed by the pod's IP, with a Host that is no cluster name: the client proxy looks
	// the address up (GetProfile by IP) and gets the pod's identity, so the request is mTLS.
	reply = transparentGet(t, app, "http://"+web.pods[0].appAddr()+"/", "")
	if reply.Pod != "web-0" || reply.ClientID != clientPod.identity() {
		t.Fatalf("by pod IP, the app answered %+v; want web-0 seeing l5d-client-id %s", reply, clientPod.identity())
	}
	testOpaqueByClusterIP(t, clientNS, client, server, db, clientPod)
}

// testOpaqueByClusterIP: opaque TCP (5432, a default opaque port: no protocol detection) to
// db's cluster IP, which no Host names: the client proxy resolves the address to the Service
// (GetProfile by IP), balances over its endpoints and sends the connection over mTLS in
// Linkerd's opaque transport; the server proxy sees the client's identity.
func testOpaqueByClusterIP(t *testing.T, clientNS *netns, client, server *proxyProcess, db service, clientPod pod) {
	var got string
	testutil.EventuallyNoError(t, within, "a TCP echo through db's cluster IP", func() error {
		conn, err := clientNS.dial(context.Background(), "tcp", net.JoinHostPort(db.clusterIP, strconv.Itoa(int(db.port))))
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		got, err = lineEcho(conn, bufio.NewReader(conn), "ping")
		return err
	})
	if got != "web-0: ping" {
		t.Fatalf("the echo through db's cluster IP answered %q, want %q", got, "web-0: ping")
	}
	testutil.EventuallyNoError(t, within, "the proxies' TCP metrics", func() error {
		in := map[string]string{"direction": "inbound", "tls": "true", "client_id": clientPod.identity()}
		if n, err := server.metric("tcp_open_total", in); err != nil || n < 1 {
			return fmt.Errorf("server proxy: tcp_open_total%v = %v (%v)", in, n, err)
		}
		out := map[string]string{"direction": "outbound", "tls": "true", "server_id": db.endpoints[0].identity()}
		if n, err := client.metric("tcp_open_total", out); err != nil || n < 1 {
			return fmt.Errorf("client proxy: tcp_open_total%v = %v (%v)", out, n, err)
		}
		return nil
	})
}

// transparentGet sends GET url from the client pod's namespace (with Host host when set, and
// a forged l5d-client-id that the proxies must replace) until it succeeds, and returns the
// app's reply.
func transparentGet(t *testing.T, app *http.Client, url, host string) echoReply {
	t.Helper()
	var reply echoReply
	testutil.EventuallyNoError(t, within, "GET "+url+" from the client", func() error {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if host != "" {
			req.Host = host
		}
		req.Header.Set("l5d-client-id", "forged.identity")
		resp, err := app.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return jsonUnmarshal(body, &reply)
	})
	return reply
}

// proxyEnv is the environment of p's `meridian proxy`, as the injector writes it, with the
// listeners at their defaults (inbound 0.0.0.0:4143, outbound 127.0.0.1:4140, admin 4191).
func (cp *controlPlane) proxyEnv(p pod, destination string) []string {
	cfg := cp.proxyConfig(p, destination)
	env := []string{
		"LINKERD2_PROXY_DESTINATION_SVC_ADDR=" + cfg.DestinationAddr,
		"LINKERD2_PROXY_DESTINATION_CONTEXT=" + cfg.DestinationContext,
		"LINKERD2_PROXY_POLICY_SVC_ADDR=" + cfg.PolicyAddr,
		"LINKERD2_PROXY_POLICY_WORKLOAD=" + cfg.PolicyWorkload,
		"LINKERD2_PROXY_IDENTITY_SVC_ADDR=" + cfg.IdentityAddr,
		"LINKERD2_PROXY_IDENTITY_LOCAL_NAME=" + cfg.LocalName,
		"LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS=" + cfg.TrustAnchors,
		"LINKERD2_PROXY_IDENTITY_TOKEN_FILE=" + cfg.TokenFile,
		"LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD=1s",
		"LINKERD2_PROXY_LOG=warn",
		"MERIDIAN_PROXY_INSECURE_CONTROL_PLANE=true", // the test's control plane serves plaintext
	}
	if p.port != 0 {
		env = append(env, fmt.Sprintf("LINKERD2_PROXY_INBOUND_PORTS=%d", p.port))
	}
	return env
}

// proxyProcess is `meridian proxy` running in a namespace as the proxy's uid.
type proxyProcess struct {
	ns   *netns
	out  *testutil.Buffer
	cmd  *exec.Cmd
	done chan error
}

// startProxyProcess starts the proxy and stops it (SIGTERM, then SIGKILL after 15 s) when the
// test ends, logging its output if the test failed.
func startProxyProcess(t *testing.T, n *netns, bin string, env []string) *proxyProcess {
	t.Helper()
	p := &proxyProcess{ns: n, out: &testutil.Buffer{}, done: make(chan error, 1)}
	started := make(chan error, 1)
	// The process is started from a thread inside the namespace (a child inherits it), and
	// that thread waits for it: it stays alive as long as the process, which Pdeathsig ties
	// to it.
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := enter(n.name); err != nil {
			started <- err
			return
		}
		p.cmd = exec.Command(bin, "proxy")
		p.cmd.Env = env
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: proxyUID, Gid: proxyUID}, Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.done <- p.cmd.Wait()
	}()
	if err := testutil.Recv(t, started, within, "meridian proxy to start"); err != nil {
		t.Fatalf("start meridian proxy in %s: %v", n.name, err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(15 * time.Second)
		defer timer.Stop()
		var err error
		select {
		case err = <-p.done:
		case <-timer.C:
			_ = p.cmd.Process.Kill()
			err = testutil.Recv(t, p.done, within, "meridian proxy to die")
			t.Errorf("meridian proxy in %s did not stop within 15 s of SIGTERM", n.name)
		}
		if err != nil {
			t.Errorf("meridian proxy in %s: %v", n.name, err)
		}
		if t.Failed() {
			t.Logf("meridian proxy in %s:\n%s", n.name, p.out.String())
		}
	})
	return p
}

// enter moves the calling thread (locked to its goroutine) into the named namespace.
func enter(name string) error {
	fd, err := unix.Open("/var/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", name, err)
	}
	return nil
}

// admin GETs path on the proxy's admin port, from inside its namespace.
func (p *proxyProcess) admin(path string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: p.ns.dial, DisableKeepAlives: true}}
	resp, err := c.Get("http://127.0.0.1:4191" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metric sums the series of family name whose labels include want, from /metrics.
func (p *proxyProcess) metric(name string, want map[string]string) (float64, error) {
	code, text, err := p.admin("/metrics")
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %d %v", code, err)
	}
	return textMetric(text, name, want), nil
}

// worldReadable opens dir and its parent (the test's temporary directories, 0700) to the
// proxy's uid.
func worldReadable(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
