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

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/policy"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/shard"
	"github.com/meridian-mesh/meridian/shard/source"
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
		cp.replicas = append(cp.replicas, cp.startReplica(fmt.Sprintf("r%d", i), key, cp.replicas[0].members.GossipAddr()))
	}
	waitRing(t, cp.replicas)
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
	gs := grpcserver.New(nil)
	svc.Register(gs)
	lis := cp.opts.listen()
	cp.identityAddr = lis.Addr().String()
	testutil.GoAll(t, "a control-plane component", svc.Run, func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, time.Second) })
	testutil.EventuallyNoError(t, within, "identity ready", svc.Ready)
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
	gs := grpcserver.New(nil)
	ctl.Register(gs)
	lis := cp.opts.listen()
	cp.policyAddr = lis.Addr().String()
	testutil.GoAll(t, "a control-plane component", ctl.Run, func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, time.Second) })
	testutil.EventuallyNoError(t, within, "policy ready", ctl.Ready)
}

// replica is one destination replica: a shard of the ring (memberlist on 127.0.0.1 with a
// gossip key) in redirect mode, on the cluster's directory.
type replica struct {
	name    string
	members *ring.Cluster
	replica *shard.Replica
	reg     *prometheus.Registry
	addr    string
	stop    func()
}

func (cp *controlPlane) startReplica(name string, gossipKey []byte, seeds ...string) *replica {
	t := cp.t
	log := logger(t, name)
	lis := cp.opts.listen()
	r := &replica{name: name, reg: prometheus.NewRegistry(), addr: lis.Addr().String()}
	rc := ring.DefaultConfig()
	rc.NodeName, rc.GossipAddr, rc.GRPCAddr, rc.Join, rc.Fast, rc.Logger = name, "127.0.0.1:0", r.addr, seeds, true, log
	rc.GossipKey = gossipKey
	members, err := ring.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	r.members = members
	cfg := shard.DefaultConfig()
	cfg.NonOwner = shard.Redirect
	cfg.Translator.OutboundTransportMode = cp.opts.transportMode
	dcfg := source.DefaultDirConfig(cp.cluster.dir)
	dcfg.Rescan = 200 * time.Millisecond
	rep, err := shard.NewReplica(cfg, shard.Deps{Source: source.NewDirWithConfig(dcfg, log), Membership: members, Registerer: r.reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.replica = rep
	gs := grpcserver.New(r.reg)
	rep.Register(gs)
	r.stop = testutil.GoAll(t, "a control-plane component", rep.Run, members.Run, func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, time.Second) })
	return r
}

// kill crashes r: its gossip stops without a leave (the others detect the failure), then the
// replica and its server stop.
func (r *replica) kill() {
	_ = r.members.Close()
	r.stop()
}

// owner returns the replica that owns service name by the ring of replicas[0].
func owner(replicas []*replica, name string) *replica {
	m := replicas[0].members.Ring().Owner(ns + "/" + name)
	for _, r := range replicas {
		if r.name == m.Name {
			return r
		}
	}
	return nil
}

// waitRing waits until every replica sees the same ring of all of them and is ready.
func waitRing(t *testing.T, replicas []*replica) {
	t.Helper()
	testutil.EventuallyNoError(t, within, fmt.Sprintf("a ring of %d to converge", len(replicas)), func() error {
		id := replicas[0].members.Ring().ID()
		for _, r := range replicas {
			if rg := r.members.Ring(); rg.Len() != len(replicas) || rg.ID() != id {
				return fmt.Errorf("%s sees %d members", r.name, rg.Len())
			}
			if err := r.replica.Ready(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
		}
		return nil
	})
}

// getStreams is the number of Get streams r serves.
func (r *replica) getStreams(t *testing.T) float64 {
	return proxytest.Gathered(t, r.reg, "destination_streams", map[string]string{"method": "get"})
}
