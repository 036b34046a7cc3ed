package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/ring/gossipkey"
	"github.com/meridian-mesh/meridian/shard"
	"github.com/meridian-mesh/meridian/shard/source"
	"github.com/meridian-mesh/meridian/translator"
)

func init() {
	register(&command{name: "destination", summary: "run a destination replica (Linkerd's Destination API)", run: runDestination})
}

// destinationFlags are the flags of `meridian destination`.
type destinationFlags struct {
	addr, adminAddr, src, kubeconfig string
	cfg                              shard.Config
	log                              *logOptions
	pprof                            bool
	tls                              *tlsFlags

	// ring
	ring, insecureGossip                       bool
	join                                       stringList
	nodeName, gossipAddr, advertise, gossipKey string
	gossipKeysDir, nonOwner, shardKey          string
	probeInterval                              time.Duration
	deadHold                                   time.Duration
	coldStartWait                              time.Duration
	expectReplicas                             int
	expectStatefulSet                          string
}

// stringList is a repeatable flag whose values may also be comma-separated.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, ring.ParseJoin(v)...)
	return nil
}

func (f *destinationFlags) parse(name string, args []string) error {
	f.cfg = shard.DefaultConfig()
	fs := newFlagSet(name)
	fs.StringVar(&f.addr, "addr", ":8086", "gRPC address of the Destination API")
	fs.StringVar(&f.adminAddr, "admin-addr", ":9996", adminUsage)
	pprofFlag(fs, &f.pprof)
	fs.StringVar(&f.src, "source", "kubernetes", "discovery source: kubernetes, or dir:PATH for a directory of Kubernetes YAML")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", kube.KubeconfigUsage)
	fs.StringVar(&f.cfg.Translator.ClusterDomain, "cluster-domain", f.cfg.Translator.ClusterDomain, "cluster DNS domain")
	fs.StringVar(&f.cfg.Translator.ControlPlaneNamespace, "control-plane-namespace", f.cfg.Translator.ControlPlaneNamespace, "control plane namespace")
	fs.StringVar(&f.cfg.Translator.TrustDomain, "trust-domain", f.cfg.Translator.TrustDomain, "identity trust domain")
	fs.StringVar(&f.cfg.Translator.OutboundTransportMode, "outbound-transport-mode", f.cfg.Translator.OutboundTransportMode,
		"transparent (opaque_transport on opaque ports only) or transport-header (every meshed endpoint gets opaque_transport: client proxies reach its inbound port with the transport header, as on one machine without iptables)")
	fs.BoolVar(&f.cfg.Translator.EnableIPv6, "enable-ipv6", false, "serve a pod with an IPv4 and an IPv6 address by its IPv6 address (else by its IPv4 one), as Linkerd's --enable-ipv6")
	fs.BoolVar(&f.cfg.Translator.ExtEndpointZoneWeights, "ext-endpoint-zone-weights", false, "weigh endpoints in the client's zone ten times the others, as Linkerd's --ext-endpoint-zone-weights")
	fs.IntVar(&f.cfg.QueueCapacity, "stream-queue-capacity", f.cfg.QueueCapacity, "bound of each stream's delta queue; a full queue coalesces")
	fs.IntVar(&f.cfg.Workers, "workers", f.cfg.Workers, "goroutines recomputing changed services")
	host, _ := os.Hostname()
	fs.BoolVar(&f.ring, "ring", false, "join a ring of replicas even without --join (a ring of one to start with)")
	fs.Var(&f.join, "join", "gossip seeds: addresses (host[:port]) or a DNS name such as a headless Service; repeatable or comma-separated. Makes this replica one shard of a ring")
	fs.StringVar(&f.nodeName, "node-name", host, "this replica's name in the ring (unique)")
	fs.StringVar(&f.gossipAddr, "gossip-addr", "", "gossip (memberlist) bind address, ip:port (default: the host of --advertise-addr, port 7946)")
	fs.StringVar(&f.advertise, "advertise-addr", "", "gRPC address other replicas use to reach this one (default: --addr, with the host's address when --addr has no host)")
	fs.StringVar(&f.gossipKey, "gossip-key-file", "", "file holding the gossip encryption key (16, 24 or 32 bytes, raw or base64); reloaded when it changes")
	fs.StringVar(&f.gossipKeysDir, "gossip-keys-dir", "", "directory of gossip keys for rotation: gossip.key (the primary, which encrypts) and any other *.key files (accepted); a Secret mounted whole. Reloaded when it changes")
	fs.DurationVar(&f.probeInterval, "gossip-probe-interval", ring.DefaultConfig().ProbeInterval, "memberlist's probe interval: a crashed replica is declared dead about 5 to 7 intervals later, and so is a live one that answers nothing for as long (a long pause on an overloaded node); longer tolerates longer pauses")
	fs.DurationVar(&f.deadHold, "gossip-dead-hold", ring.DefaultConfig().DeadHold, "how long a replica declared dead stays in the ring while its gRPC port still accepts connections (starved of CPU, not crashed): until it refutes, for at most this long; a replica that refuses, or does not answer within a second, leaves at once; 0 leaves at once always")
	fs.DurationVar(&f.coldStartWait, "ring-cold-start-wait", 30*time.Second, "when this replica finds no other replica serving (replicas started together), how long at most it waits for the ring to form before loading its share, so that the first one up does not load the whole cluster: it loads once --ring-expect-replicas are present, the ring (of two replicas or more) has not changed for a sixth of this, or another replica serves; a replica alone waits all of it unless it expects 1; 0 loads at once")
	fs.IntVar(&f.expectReplicas, "ring-expect-replicas", 0, "the ring's replica count, when known: ends a cold start's wait as soon as that many replicas are present (0: unknown)")
	fs.StringVar(&f.expectStatefulSet, "ring-expect-statefulset", "", "read --ring-expect-replicas at start from this StatefulSet's spec.replicas, in --control-plane-namespace, through the API server (--kubeconfig); when that fails, the wait goes on without a count (the chart sets it; needs get on that StatefulSet)")
	fs.BoolVar(&f.insecureGossip, "insecure-gossip", false, "allow --ring/--join without a gossip key: plaintext gossip that any process reaching the gossip port can join (tests and a local mesh only)")
	fs.StringVar(&f.nonOwner, "non-owner", "forward", "for a service another replica owns: forward (relay the stream) or redirect (refuse, naming the owner)")
	fs.StringVar(&f.shardKey, "shard-key", string(shard.ShardByService), "what places a service in the ring, the same on every replica: service (namespace/name) or namespace (every service of a namespace together; with --source kubernetes, the replica asks the API server for its namespaces' EndpointSlices only where the ShardedListAndWatch feature gate is on)")
	f.log = serverLogFlags(fs, "log level: debug, info, warn, error")
	f.tls = addTLSFlags(fs, "destination", false)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	return usageError(f.check())
}

// check validates the parsed flags' values and fills what they imply.
func (f *destinationFlags) check() error {
	if _, _, err := sourceSpec(f.src, sourceKinds); err != nil {
		return err
	}
	if err := f.tls.resolve(f.cfg.Translator.ControlPlaneNamespace, f.cfg.Translator.TrustDomain); err != nil {
		return err
	}
	if _, err := translator.ParseOutboundTransportMode(f.cfg.Translator.OutboundTransportMode); err != nil {
		return fmt.Errorf("--outbound-transport-mode: %w", err)
	}
	mode, err := shard.ParseNonOwnerMode(f.nonOwner)
	if err != nil {
		return err
	}
	f.cfg.NonOwner = mode
	if f.cfg.ShardKey, err = shard.ParseShardKey(f.shardKey); err != nil {
		return fmt.Errorf("--shard-key: %w", err)
	}
	for _, seed := range f.join {
		if err := ring.CheckSeed(seed); err != nil {
			return fmt.Errorf("--join %s: %s", quote.Prefix(seed, 64), quote.Message(err.Error())) // the error quotes the seed again
		}
	}
	if f.cfg.QueueCapacity < 1 {
		return fmt.Errorf("--stream-queue-capacity must be at least 1, got %d", f.cfg.QueueCapacity)
	}
	if f.deadHold < 0 {
		return fmt.Errorf("--gossip-dead-hold %s: want 0 (no hold) or more", f.deadHold)
	}
	if f.coldStartWait < 0 || f.expectReplicas < 0 {
		return fmt.Errorf("--ring-cold-start-wait %s, --ring-expect-replicas %d: want 0 or more", f.coldStartWait, f.expectReplicas)
	}
	if f.probeInterval < 100*time.Millisecond {
		return fmt.Errorf("--gossip-probe-interval %s: want at least 100ms", f.probeInterval)
	}
	return f.checkGossipKeys()
}

// checkGossipKeys refuses a ring without a gossip key unless --insecure-gossip says so.
func (f *destinationFlags) checkGossipKeys() error {
	keyed := f.gossipKey != "" || f.gossipKeysDir != ""
	switch {
	case f.gossipKey != "" && f.gossipKeysDir != "":
		return errors.New("--gossip-key-file and --gossip-keys-dir: give one (the directory holds the primary key as gossip.key)")
	case keyed && f.insecureGossip:
		return errors.New("--insecure-gossip with a gossip key: choose one")
	case (f.ring || len(f.join) > 0) && !keyed && !f.insecureGossip:
		return errors.New("--ring/--join need a gossip key: give --gossip-key-file FILE or --gossip-keys-dir DIR " +
			"(without a key any process that reaches the gossip port can join the ring, take a share of the services and serve its own endpoints); " +
			"--insecure-gossip allows plaintext gossip for tests and a local mesh")
	}
	return nil
}

// sourceKinds are the discovery sources `--source KIND:ARG` may name besides kubernetes
// and dir:. Other files of this command add to it in their init (the bench harness adds
// feed:, its synthetic cluster), so that the destination does not depend on them.
var sourceKinds = map[string]func(arg string, log *zap.Logger) (source.Source, error){}

// newSource builds the discovery source named by spec.
// sourceSpec splits a --source value into its kind and argument: kubernetes, dir:PATH, or
// KIND:ARG for a kind of other (nil for none), and refuses anything else.
func sourceSpec[F any](spec string, other map[string]F) (kind, arg string, err error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	_, known := other[kind]
	switch {
	case spec == "kubernetes":
		return spec, "", nil
	case kind == "dir" && arg == "":
		return "", "", fmt.Errorf("--source dir: needs a path, as in dir:deploy/examples")
	case kind == "dir", known && hasArg:
		return kind, arg, nil
	}
	return "", "", fmt.Errorf("--source %s: want kubernetes or dir:PATH", quote.String(spec))
}

func newSource(spec, kubeconfig string, reg prometheus.Registerer, log *zap.Logger) (source.Source, error) {
	kind, arg, err := sourceSpec(spec, sourceKinds)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "kubernetes":
		kc, err := kube.NewClients(kubeconfig)
		if err != nil {
			return nil, err
		}
		md, err := metadata.NewForConfig(kc.Config)
		if err != nil {
			return nil, fmt.Errorf("kubernetes metadata client: %w", err)
		}
		clients := source.KubernetesClients{Typed: kc.Typed, Dynamic: kc.Dynamic, Metadata: md}
		return source.NewKubernetesFrom(clients, source.DefaultKubernetesConfig(), reg, log), nil
	case "dir":
		cfg := source.DefaultDirConfig(arg)
		cfg.Registerer = reg
		return source.NewDirWithConfig(cfg, log), nil
	default:
		return sourceKinds[kind](arg, log)
	}
}

func runDestination(ctx context.Context, args []string) error {
	var f destinationFlags
	if err := f.parse("destination", args); err != nil {
		return err
	}
	srv, syncLog, err := newProcess(f.log, f.adminAddr)
	if err != nil {
		return err
	}
	defer syncLog()
	log := srv.Log
	srv.Pprof = f.pprof
	src, err := newSource(f.src, f.kubeconfig, srv.Registry, log)
	if err != nil {
		return err
	}
	id, err := f.tls.identity(log)
	if err != nil {
		return err
	}
	defer id.Close()
	srv.Group.Add("tls", id)
	gc := f.tls.grpc(f.addr, id, true)
	gc.Options = shard.ServerOptions()
	gs, err := srv.WithGRPCConfig(gc)
	if err != nil {
		return fmt.Errorf("--local-addr: %w", err)
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	defer srv.Close()
	// Relays go to other replicas, which prove the same identity as this one.
	deps := shard.Deps{Source: src, Registerer: srv.Registry, Logger: log, RelayCreds: id.ClientCredentials(id.Name())}
	var members *ring.Cluster
	var reloader *gossipkey.Reloader
	if f.ring || len(f.join) > 0 {
		f.readExpectedReplicas(ctx, log)
		members, reloader, err = f.newRing(srv.Addr(), srv.Registry, log)
		if err != nil {
			return err
		}
		deps.Membership = members
		srv.Group.Add("ring", members)
		if reloader != nil {
			srv.Group.Add("gossip-keys", reloader)
		}
		log.Info("ring", zap.String("node", f.nodeName), zap.String("gossip", members.GossipAddr()), zap.Strings("join", f.join))
	}
	replica, err := shard.NewReplica(f.cfg, deps)
	if err != nil {
		if members != nil {
			_ = members.Close()
		}
		return err
	}
	replica.Register(gs)
	srv.Group.Add("replica", replica)
	srv.AdminRoutes["/ring"] = replica.RingHandler()
	log.Info("destination replica starting", zap.String("source", f.src))
	return srv.Run(ctx)
}

// readExpectedReplicas sets the ring's expected count from --ring-expect-statefulset's
// spec.replicas, read once at start, unless --ring-expect-replicas gave one or there is no
// cold-start wait to end. Failing to read it is not fatal: the wait then goes on without a
// count (ring.Config).
func (f *destinationFlags) readExpectedReplicas(ctx context.Context, log *zap.Logger) {
	if f.expectStatefulSet == "" || f.expectReplicas > 0 || f.coldStartWait == 0 {
		return
	}
	ns, name := f.cfg.Translator.ControlPlaneNamespace, f.expectStatefulSet
	n, err := statefulSetReplicas(ctx, f.kubeconfig, ns, name)
	if err != nil {
		log.Warn("cold start: cannot read the ring's replica count from its StatefulSet; waiting for the ring to be still instead",
			zap.String("statefulset", ns+"/"+name), zap.Error(err))
		return
	}
	f.expectReplicas = n
	log.Info("cold start: expecting the StatefulSet's replicas", zap.String("statefulset", ns+"/"+name), zap.Int("expect_replicas", n))
}

// statefulSetReplicas reads spec.replicas of the StatefulSet ns/name.
func statefulSetReplicas(ctx context.Context, kubeconfig, ns, name string) (int, error) {
	kc, err := kube.NewClients(kubeconfig)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ss, err := kc.Typed.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	if ss.Spec.Replicas == nil {
		return 1, nil // the API server's default
	}
	return int(*ss.Spec.Replicas), nil
}

// newRing builds this replica's memberlist node from the flags, and the reloader of its
// gossip keys (nil with --insecure-gossip).
func (f *destinationFlags) newRing(grpcAddr net.Addr, reg prometheus.Registerer, log *zap.Logger) (*ring.Cluster, *gossipkey.Reloader, error) {
	cfg := ring.DefaultConfig()
	cfg.Hash = f.cfg.ShardKey.RingShape()
	cfg.NodeName = f.nodeName
	cfg.Join = f.join
	cfg.ProbeInterval = f.probeInterval
	cfg.ColdStartWait, cfg.ExpectMembers = f.coldStartWait, f.expectReplicas
	cfg.DeadHold = f.deadHold
	if f.deadHold == 0 {
		cfg.DeadHold = -1 // ring.Config: negative is no hold
	}
	cfg.Logger = log.Named("ring")
	cfg.Registerer = reg
	cfg.GRPCAddr = f.advertise
	if cfg.GRPCAddr == "" {
		cfg.GRPCAddr = advertiseFor(grpcAddr)
	}
	cfg.GossipAddr = f.gossipAddr
	if cfg.GossipAddr == "" {
		a, err := ring.DefaultGossipAddr(cfg.GRPCAddr)
		if err != nil {
			// The default gossip address comes from the advertised one (advertiseFor gives
			// --addr's an IP): name that flag; --gossip-addr replaces the default, and is the
			// only way when the advertised host is a name.
			return nil, nil, fmt.Errorf("%w: --advertise-addr: %v (--gossip-addr IP:PORT)", errUsage, err)
		}
		cfg.GossipAddr = a
	}
	files := gossipkey.Files{File: f.gossipKey, Dir: f.gossipKeysDir}
	var keys gossipkey.Keys
	if f.insecureGossip {
		cfg.InsecureGossip = true
	} else {
		var err error
		if keys, err = gossipkey.Load(files); err != nil {
			return nil, nil, err
		}
		cfg.GossipKey, cfg.AcceptedKeys = keys.Primary, keys.Accepted
	}
	members, err := ring.New(cfg)
	if err != nil || f.insecureGossip {
		return members, nil, err
	}
	reloader, err := gossipkey.NewReloader(gossipkey.Config{Files: files}, keys, gossipkey.Deps{Target: members, Logger: cfg.Logger, Registerer: reg})
	if err != nil {
		_ = members.Close()
		return nil, nil, err
	}
	return members, reloader, nil
}

// advertiseFor turns a listening address into one other replicas can dial: an unspecified
// host becomes $POD_IP, or the first non-loopback address of this host.
func advertiseFor(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return a.String()
	}
	port := strconv.Itoa(tcp.Port)
	if ip := os.Getenv("POD_IP"); ip != "" {
		return net.JoinHostPort(ip, port)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
				return net.JoinHostPort(n.IP.String(), port)
			}
		}
	}
	return net.JoinHostPort("127.0.0.1", port)
}
