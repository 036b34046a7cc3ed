package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/policy"
	"github.com/meridian-mesh/meridian/proxy/internal/replicatest"
	"github.com/meridian-mesh/meridian/shard"
)

// within bounds every wait of these tests (generous: -race on a shared 2-core machine).
const within = 30 * time.Second

// controlPlane is the mesh's control plane, in process: identity (local tokens), a ring of
// destination replicas in redirect mode, and the policy controller, all on the cluster's
// directory.
type controlPlane struct {
	t        *testing.T
	cluster  *cluster
	opts     cpOptions
	anchors  string // the trust anchors, PEM
	tokenKey *ecdsa.PrivateKey
	tokenDir string

	identityAddr, policyAddr string
	replicas                 []*replica
}

// cpOptions shape the control plane.
type cpOptions struct {
	// replicas is the ring's size.
	replicas int
	// transportMode is the destination's --outbound-transport-mode (translator's).
	transportMode string
	// listen makes the gRPC listeners (nil: 127.0.0.1:0), so that a test can put them in a
	// network namespace; gossip stays on 127.0.0.1.
	listen func() net.Listener
}

// startControlPlane starts the control plane and returns once every part is ready and the
// ring has converged.
func startControlPlane(t *testing.T, c *cluster, opts cpOptions) *controlPlane {
	t.Helper()
	if opts.listen == nil {
		opts.listen = func() net.Listener { return testutil.Listen(t) }
	}
	cp := &controlPlane{t: t, cluster: c, opts: opts, tokenDir: t.TempDir()}
	cp.startIdentity()
	cp.startPolicy()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cp.replicas = []*replica{cp.startReplica("r0", key)}
	for i := 1; i < opts.replicas; i++ {
		cp.replicas = append(cp.replicas, cp.startReplica(fmt.Sprintf("r%d", i), key, cp.replicas[0].Members.GossipAddr()))
	}
	replicatest.WaitRing(t, cp.replicas)
	return cp
}

func logger(t *testing.T, name string) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name)
}

// startIdentity generates an install (trust anchor, issuer, local token key) as `meridian
// identity init --local-token-key` does and serves Identity with --tokens=local.
func (cp *controlPlane) startIdentity() {
	t := cp.t
	dir := t.TempDir()
	g, err := identity.GenerateInstall("cluster.local", "linkerd", 24*time.Hour, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteDir(dir, false); err != nil {
		t.Fatal(err)
	}
	cp.anchors = string(g.AnchorsPEM)
	if cp.tokenKey, err = identity.ParseLocalTokenKey(g.LocalTokenKey); err != nil {
		t.Fatal(err)
	}
	cfg := identity.DefaultConfig()
	cfg.IssuerDir, cfg.Tokens = dir, identity.TokensLocal
	cfg.LocalTokenKey = filepath.Join(dir, identity.FileLocalTokenKey)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	svc, err := identity.New(ctx, cfg, identity.Deps{Logger: logger(t, "identity")})
	if err != nil {
		t.Fatal(err)
	}
	cp.identityAddr = cp.serve("identity", svc)
}

// component is a control-plane service: identity or the policy controller.
type component interface {
	Register(grpc.ServiceRegistrar)
	Run(context.Context) error
	Ready() error
}

// serve runs c and its gRPC server on a listener of its own until the test ends, waits
// until c is ready and returns its address.
func (cp *controlPlane) serve(name string, c component) string {
	t := cp.t
	gs := grpcserver.New(nil)
	c.Register(gs)
	lis := cp.opts.listen()
	testutil.GoAll(t, "a control-plane component", c.Run, func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, time.Second) })
	testutil.EventuallyNoError(t, within, name+" ready", c.Ready)
	return lis.Addr().String()
}

// token writes a local-mesh token for ServiceAccount sa (what the projected ServiceAccount
// token is in a cluster) and returns its file, readable by every user (a proxy process may
// run as the proxy's uid).
func (cp *controlPlane) token(sa string) string {
	cp.t.Helper()
	tok, err := identity.MintLocalToken(cp.tokenKey, ns, sa, identity.Audience, time.Now(), time.Hour)
	if err != nil {
		cp.t.Fatal(err)
	}
	file := filepath.Join(cp.tokenDir, sa+".token")
	if err := os.WriteFile(file, tok, 0o644); err != nil {
		cp.t.Fatal(err)
	}
	return file
}

// startPolicy serves the policy controller on the cluster's directory.
func (cp *controlPlane) startPolicy() {
	t := cp.t
	cfg := policy.DefaultConfig()
	cfg.Source = "dir:" + cp.cluster.dir
	ctl, err := policy.New(cfg, policy.Deps{Logger: logger(t, "policy")})
	if err != nil {
		t.Fatal(err)
	}
	cp.policyAddr = cp.serve("policy", ctl)
}

// replica is one destination replica: a shard of the ring (memberlist on 127.0.0.1 with a
// gossip key) in redirect mode, on the cluster's directory. addr is Node.Addr (by the name
// transparent_linux_test.go uses).
type replica struct {
	*replicatest.Node
	addr string
}

func (cp *controlPlane) startReplica(name string, gossipKey []byte, seeds ...string) *replica {
	n := replicatest.Start(cp.t, replicatest.Config{Name: name, Dir: cp.cluster.dir, Listener: cp.opts.listen(), Ring: true, Seeds: seeds,
		GossipKey: gossipKey, NonOwner: shard.Redirect, TransportMode: cp.opts.transportMode})
	return &replica{Node: n, addr: n.Addr}
}

// owner returns the replica that owns service name by the ring of replicas[0].
func owner(replicas []*replica, name string) *replica {
	return replicatest.Owner(replicas, ns+"/"+name)
}
