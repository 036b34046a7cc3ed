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

// ClientsFor builds the clients for rc.
func ClientsFor(rc *rest.Config) (*Clients, error) {
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
