package kubeenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/meridian-mesh/meridian/internal/child"
)

// Config configures an API server and its etcd.
type Config struct {
	// AssetsDir holds kube-apiserver and etcd ("" : DefaultAssetsDir()).
	AssetsDir string
	// FeatureGates is kube-apiserver's --feature-gates, as in "ShardedListAndWatch=true"
	// ("": the release's defaults).
	FeatureGates string
	// ServiceCIDRs is --service-cluster-ip-range: one range, or an IPv4 and an IPv6 one
	// separated by a comma ("": DefaultServiceCIDRs).
	ServiceCIDRs string
	// APIServerArgs are more kube-apiserver flags ("--name=value"), given after the defaults
	// and so overriding them.
	APIServerArgs []string
	// CRDs, when not nil, holds CustomResourceDefinition manifests (the *.yaml files at its
	// root), installed and served before Start returns.
	CRDs fs.FS
	// Output, when not nil, receives a copy of both processes' output (their logs are kept in
	// the Env's directory either way).
	Output io.Writer
	// StartTimeout bounds the start of each process and the CRDs' installation (0: 2 minutes);
	// StopTimeout the graceful stop of each process (0: 1 minute).
	StartTimeout, StopTimeout time.Duration
}

// DefaultServiceCIDRs is the service range when the Config names none (envtest's).
const DefaultServiceCIDRs = "10.0.0.0/24"

// Env is a running etcd and API server. Its methods are safe for concurrent use.
type Env struct {
	// Config is an admin client configuration (a client certificate in system:masters) of the
	// API server. Copy it (rest.CopyConfig) before changing it.
	Config *rest.Config

	cfg     Config
	dir     string
	apiArgs []string
	apiURL  string
	health  *http.Client

	mu      sync.Mutex
	etcd    *process
	api     *process
	stopped bool
}

// Start starts etcd and the API server in a new temporary directory and waits until the API
// server is ready and cfg's CRDs are served. A port found free that another process takes
// before the server binds it makes Start try again on new ports (three times in all).
func Start(ctx context.Context, cfg Config) (*Env, error) {
	if cfg.AssetsDir == "" {
		cfg.AssetsDir = DefaultAssetsDir()
	}
	if cfg.ServiceCIDRs == "" {
		cfg.ServiceCIDRs = DefaultServiceCIDRs
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = time.Minute
	}
	if err := CheckAssets(cfg.AssetsDir); err != nil {
		return nil, err
	}
	if err := checkFeatureGates(cfg.FeatureGates); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		e, err := start(ctx, cfg)
		if err == nil || attempt == 3 || !errors.Is(err, child.ErrAddrInUse) {
			return e, err
		}
	}
}

// checkFeatureGates checks the form of a --feature-gates value: Name=true|false, comma
// separated. The API server judges the names.
func checkFeatureGates(s string) error {
	if s == "" {
		return nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if _, err := strconv.ParseBool(val); !ok || name == "" || err != nil {
			return fmt.Errorf("feature gates %q: want Name=true|false[,Name=...], not %q", quote(s), quote(kv))
		}
	}
	return nil
}

// quote returns at most 64 bytes of s.
func quote(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func start(ctx context.Context, cfg Config) (_ *Env, err error) {
	dir, err := os.MkdirTemp("", "kubeenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{cfg: cfg, dir: dir}
	defer func() {
		if err != nil {
			_ = e.Stop() // stops what started and removes dir
		}
	}()
	creds, err := writeCerts(dir)
	if err != nil {
		return nil, err
	}
	etcdURL, err := e.startEtcd(ctx)
	if err != nil {
		return nil, err
	}
	port, err := child.FreePort()
	if err != nil {
		return nil, err
	}
	e.apiURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	e.apiArgs = apiServerArgs(cfg, dir, etcdURL, port)
	if e.health, err = apiHealthClient(creds); err != nil {
		return nil, err
	}
	if err := e.startAPIServer(ctx); err != nil {
		return nil, err
	}
	e.Config = &rest.Config{
		Host: e.apiURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: creds.caPEM, CertData: creds.certPEM, KeyData: creds.keyPEM,
		},
	}
	if cfg.CRDs != nil {
		if err := installCRDs(ctx, e.Config, cfg.CRDs, cfg.StartTimeout); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// startEtcd starts etcd with its data in the Env's directory and returns its client URL once
// it is healthy.
func (e *Env) startEtcd(ctx context.Context) (string, error) {
	client, err := child.FreePort()
	if err != nil {
		return "", err
	}
	peer, err := child.FreePort()
	if err != nil {
		return "", err
	}
	u := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(client))
	args := []string{
		"--name=kubeenv",
		"--data-dir=" + filepath.Join(e.dir, "etcd"),
		"--listen-client-urls=" + u,
		"--advertise-client-urls=" + u,
		"--listen-peer-urls=http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(peer)),
		"--initial-advertise-peer-urls=http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(peer)),
		"--initial-cluster=kubeenv=http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(peer)),
		// A throwaway store: no fsync (as envtest runs it), and warnings only in its log.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
	p, err := startProcess("etcd", filepath.Join(e.cfg.AssetsDir, "etcd"), args, filepath.Join(e.dir, "etcd.log"), e.cfg.Output)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	e.etcd = p
	e.mu.Unlock()
	return u, p.waitHealthy(ctx, healthClient(nil), u+"/health", e.cfg.StartTimeout)
}

// apiServerArgs returns the API server's flags.
func apiServerArgs(cfg Config, dir, etcdURL string, port int) []string {
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + dir,
		"--tls-cert-file=" + filepath.Join(dir, servingCertFile),
		"--tls-private-key-file=" + filepath.Join(dir, servingKeyFile),
		"--client-ca-file=" + filepath.Join(dir, clientCAFile),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=" + cfg.ServiceCIDRs,
		"--service-account-issuer=https://127.0.0.1:" + strconv.Itoa(port) + "/",
		"--service-account-key-file=" + filepath.Join(dir, saPublicFile),
		"--service-account-signing-key-file=" + filepath.Join(dir, saKeyFile),
		// No controller-manager creates default ServiceAccounts.
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		// No Endpoints of the kubernetes Service to keep for a single server on loopback.
		"--endpoint-reconciler-type=none",
		// On SIGTERM, drain ordinary requests, then give open watches 2 s (not the default
		// request timeout, 60 s, which an informer's watch always uses up) to see GOAWAY.
		"--shutdown-send-retry-after=true",
	}
	if cfg.FeatureGates != "" {
		args = append(args, "--feature-gates="+cfg.FeatureGates)
	}
	return append(args, cfg.APIServerArgs...)
}

// startAPIServer starts the API server with e.apiArgs and waits until /readyz answers.
func (e *Env) startAPIServer(ctx context.Context) error {
	p, err := startProcess("kube-apiserver", filepath.Join(e.cfg.AssetsDir, "kube-apiserver"), e.apiArgs, filepath.Join(e.dir, "kube-apiserver.log"), e.cfg.Output)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.api = p
	e.mu.Unlock()
	return p.waitHealthy(ctx, e.health, e.apiURL+"/readyz", e.cfg.StartTimeout)
}

// RestartAPIServer stops the API server (etcd keeps its data) and starts it again on the same
// address, with the same certificates and ServiceAccount signing key, cutting every open
// watch. Existing clients and Config stay valid.
func (e *Env) RestartAPIServer(ctx context.Context) error {
	e.mu.Lock()
	api, stopped := e.api, e.stopped
	e.mu.Unlock()
	if stopped {
		return errors.New("kubeenv: restart of a stopped API server")
	}
	if err := api.stop(e.cfg.StopTimeout); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := e.startAPIServer(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// Stop stops the API server, then etcd (SIGTERM, SIGKILL after the stop timeout), and
// removes the directory. A second call does nothing.
func (e *Env) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	var errs []error
	for _, p := range []*process{e.api, e.etcd} {
		if p != nil {
			errs = append(errs, p.stop(e.cfg.StopTimeout))
		}
	}
	if e.health != nil {
		e.health.CloseIdleConnections()
	}
	errs = append(errs, os.RemoveAll(e.dir))
	return errors.Join(errs...)
}

// PIDs returns the process ids of the API server and of etcd.
func (e *Env) PIDs() (apiServer, etcd int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.api.Pid(), e.etcd.Pid()
}

// Dir returns the directory of the certificates, etcd's data and the logs.
func (e *Env) Dir() string { return e.dir }

// LogTails returns the end of both processes' logs, for an error report.
func (e *Env) LogTails() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, p := range []*process{e.api, e.etcd} {
		if p != nil {
			fmt.Fprintf(&b, "%s (%s):\n%s\n", p.Name(), p.LogPath(), p.LogTail(20))
		}
	}
	return b.String()
}

// WriteKubeconfig writes a kubeconfig file of Config (the admin) to path, readable by this
// user only, for other processes (`--kubeconfig`).
func (e *Env) WriteKubeconfig(path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubeenv"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: e.Config.CertData, ClientKeyData: e.Config.KeyData}
	kc.Contexts["kubeenv"] = &clientcmdapi.Context{Cluster: "kubeenv", AuthInfo: "admin"}
	kc.CurrentContext = "kubeenv"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// apiHealthClient returns the HTTP client of the API server's health checks: it trusts the
// serving CA and presents the admin certificate.
func apiHealthClient(c credentials) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.caPEM) {
		return nil, errors.New("kubeenv: the serving CA does not parse")
	}
	cert, err := tls.X509KeyPair(c.certPEM, c.keyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubeenv: the admin certificate: %w", err)
	}
	return healthClient(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}
