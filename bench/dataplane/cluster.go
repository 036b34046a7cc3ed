package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// cluster is everything a run starts: the application, and as the variants need them the
// control plane and the two proxies, and the two nginx processes.
type cluster struct {
	cfg  Config
	topo topology
	dir  string // the work directory: configurations and logs
	log  *zap.Logger
	app  *app

	identity, destination *proc
	client, server        *proc // the proxies
	nginx                 []*proc
	nginxVersion          string
}

// stopGrace is how long a process has to exit on SIGTERM before it is killed.
const stopGrace = 5 * time.Second

// startCluster starts what cfg's variants need and waits until it serves.
func startCluster(ctx context.Context, cfg Config, log *zap.Logger) (_ *cluster, err error) {
	topo, err := pickTopology()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "meridian-bench-proxy-")
	if err != nil {
		return nil, err
	}
	c := &cluster{cfg: cfg, topo: topo, dir: dir, log: log}
	defer func() {
		if err != nil {
			c.close(false)
		}
	}()
	log.Info("benchmark network", zap.String("net", topo.addr(0).String()+"/24"), zap.String("dir", dir))
	if c.app, err = startApp(topo.hostPort(hostApp, appHTTPPort), topo.hostPort(hostApp, appGRPCPort)); err != nil {
		return nil, fmt.Errorf("start the application: %w", err)
	}
	if slices.Contains(cfg.Variants, Meridian) {
		if err := c.startMeridian(ctx); err != nil {
			return nil, err
		}
	}
	if slices.Contains(cfg.Variants, Nginx) {
		if err := c.startNginx(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// run runs the meridian binary to completion (identity init, identity token).
func (c *cluster) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.cfg.Binary, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("meridian %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// startMeridian starts identity (local tokens), one destination replica on the cluster's
// YAML, and the two proxies, and waits for each to be ready.
func (c *cluster) startMeridian(ctx context.Context) error {
	t, bin := c.topo, c.cfg.Binary
	idDir := filepath.Join(c.dir, "identity")
	if _, err := c.run(ctx, "identity", "init", "--out", idDir, "--local-token-key"); err != nil {
		return err
	}
	keyFile := filepath.Join(idDir, "token-key.pem")
	// The pods' tokens, and the destination's: it serves mTLS as linkerd-destination, with a
	// certificate from identity, as in a cluster.
	tokens := map[string]string{}
	for _, sa := range []string{"client", "app", "linkerd-destination"} {
		ns := namespace
		if sa == "linkerd-destination" {
			ns = controlPlaneNS
		}
		tok, err := c.run(ctx, "identity", "token", "--key", keyFile, "--namespace", ns, "--service-account", sa)
		if err != nil {
			return err
		}
		tokens[sa] = filepath.Join(c.dir, sa+".token")
		if err := os.WriteFile(tokens[sa], bytes.TrimSpace(tok), 0o600); err != nil {
			return err
		}
	}
	anchors, err := os.ReadFile(filepath.Join(idDir, "ca-bundle.crt"))
	if err != nil {
		return err
	}
	srcDir := filepath.Join(c.dir, "cluster")
	if err := os.Mkdir(srcDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(srcDir, "bench.yaml"), t.clusterYAML(), 0o644); err != nil {
		return err
	}
	if c.identity, err = startProc("identity", c.dir, bin, []string{"identity",
		"--addr", t.hostPort(hostControl, identityPort), "--admin-addr", t.hostPort(hostControl, identityAdmin),
		"--tokens", "local", "--local-token-key", keyFile, "--issuer-dir", idDir, "--log-level", "warn"}, nil); err != nil {
		return err
	}
	if c.destination, err = startProc("destination", c.dir, bin, []string{"destination",
		"--source", "dir:" + srcDir, "--addr", t.hostPort(hostControl, destinationPort),
		"--admin-addr", t.hostPort(hostControl, destAdmin), "--outbound-transport-mode", "transport-header",
		"--control-plane-namespace", controlPlaneNS, "--log-level", "warn",
		"--identity-addr", t.hostPort(hostControl, identityPort), "--identity-trust-anchors", filepath.Join(idDir, "ca-bundle.crt"),
		"--identity-token-file", tokens["linkerd-destination"]}, nil); err != nil {
		return err
	}
	for _, p := range []struct {
		p    *proc
		addr string
	}{{c.identity, t.hostPort(hostControl, identityAdmin)}, {c.destination, t.hostPort(hostControl, destAdmin)}} {
		if err := p.p.waitReady(ctx, "http://"+p.addr+"/ready", c.cfg.ReadyTimeout); err != nil {
			return err
		}
	}
	var env []string
	if n := c.cfg.ProxyGOMAXPROCS; n > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(n))
	}
	ports := strconv.Itoa(appHTTPPort) + "," + strconv.Itoa(appGRPCPort)
	if c.cfg.ProxyBinary != "" {
		bin = c.cfg.ProxyBinary
	}
	if c.server, err = startProc("proxy-server", c.dir, bin, []string{"proxy"},
		append(t.proxyEnv(hostApp, serverID, string(anchors), tokens["app"], ports), env...)); err != nil {
		return err
	}
	if c.client, err = startProc("proxy-client", c.dir, bin, []string{"proxy"},
		append(t.proxyEnv(hostClient, clientID, string(anchors), tokens["client"], ""), env...)); err != nil {
		return err
	}
	for _, p := range []struct {
		p    *proc
		host byte
	}{{c.server, hostApp}, {c.client, hostClient}} {
		if err := p.p.waitReady(ctx, c.adminURL(p.host, "/ready"), c.cfg.ReadyTimeout); err != nil {
			return err
		}
	}
	return nil
}

// adminURL is a path on the admin port of the proxy of pod host.
func (c *cluster) adminURL(host byte, path string) string {
	return "http://" + c.topo.hostPort(host, proxyAdminPort) + path
}

// startNginx starts the back nginx, then the front one, and waits until both accept.
func (c *cluster) startNginx(ctx context.Context) error {
	bin, err := exec.LookPath(c.cfg.Nginx)
	if err != nil {
		return fmt.Errorf("%w: %v (install Debian's nginx: apt-get install nginx)", errNoNginx, err)
	}
	if out, err := exec.CommandContext(ctx, bin, "-v").CombinedOutput(); err == nil {
		c.nginxVersion = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version:"))
	}
	for _, front := range []bool{false, true} {
		name, host := "nginx-back", byte(hostNginx2)
		if front {
			name, host = "nginx-front", hostNginx1
		}
		dir := filepath.Join(c.dir, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, c.topo.nginxConf(front, c.cfg.NginxWorkers, dir), 0o644); err != nil {
			return err
		}
		p, err := startProc(name, c.dir, bin, []string{"-e", "stderr", "-p", dir, "-c", conf}, nil)
		if err != nil {
			return err
		}
		c.nginx = append(c.nginx, p)
		if err := waitListening(ctx, p, []string{c.topo.hostPort(host, appHTTPPort), c.topo.hostPort(host, appGRPCPort)}, c.cfg.ReadyTimeout); err != nil {
			return err
		}
	}
	return nil
}

// waitListening waits until every address accepts a connection.
func waitListening(ctx context.Context, p *proc, addrs []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, a := range addrs {
		for {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", a)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-p.Exited():
				return p.Failure("before it listened on " + a)
			case <-ctx.Done():
				return p.Failure(fmt.Sprintf("not listening on %s within %s", a, timeout))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// procs are the processes of a variant, by name (client and server proxies, or nginx's).
func (c *cluster) procs(v Variant) []*proc {
	switch v {
	case Meridian:
		return []*proc{c.client, c.server}
	case Nginx:
		return c.nginx
	}
	return nil
}

// close stops every process and the application; the work directory is removed unless
// keep (or cfg.KeepLogs).
func (c *cluster) close(ok bool) {
	for _, p := range append(append([]*proc{c.client, c.server}, c.nginx...), c.destination, c.identity) {
		if p != nil {
			p.Stop(stopGrace)
		}
	}
	if c.app != nil {
		c.app.close()
	}
	if ok && !c.cfg.KeepLogs {
		_ = os.RemoveAll(c.dir)
		return
	}
	c.log.Info("kept the benchmark's work directory (configurations and logs)", zap.String("dir", c.dir))
}

// errNoIdentity: the application did not see the client's identity on Meridian's path.
var errNoIdentity = errors.New("the application did not see the client proxy's identity in l5d-client-id: the traffic did not cross mTLS")
