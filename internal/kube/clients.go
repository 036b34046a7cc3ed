package kube

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeconfigUsage is the help text of every command's --kubeconfig flag.
const KubeconfigUsage = "kubeconfig file (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config)"

// Clients are the API clients of one process, built from one rest.Config.
type Clients struct {
	Config  *rest.Config
	Typed   kubernetes.Interface
	Dynamic dynamic.Interface
}

// NewClients finds the API server with RESTConfig(kubeconfig) and builds the clients.
func NewClients(kubeconfig string) (*Clients, error) {
	rc, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return ClientsFor(rc)
}

// The request rate a component's clients may use when rc sets none (client-go's own default
// is 5 a second, burst 10). Informers make a few requests; the destination also reads every
// ServiceProfile of its share with one GET each when it starts or gains services, which at
// client-go's default took a replica with 5,000 profiles over 15 minutes to become ready.
const (
	DefaultQPS   = 100
	DefaultBurst = 200
)

// ClientsFor builds the clients for rc, with DefaultQPS and DefaultBurst when rc sets no
// rate (rc is then changed).
func ClientsFor(rc *rest.Config) (*Clients, error) {
	if rc.QPS == 0 && rc.RateLimiter == nil {
		rc.QPS, rc.Burst = DefaultQPS, DefaultBurst
	}
	typed, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return &Clients{Config: rc, Typed: typed, Dynamic: dyn}, nil
}
