package kube

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig returns the configuration to reach the Kubernetes API: from the kubeconfig file
// named (a --kubeconfig flag) when not empty; else from $KUBECONFIG (a list of files, as
// kubectl reads it) when set; else the in-cluster service account; else ~/.kube/config when
// it exists.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(env)}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig from $%s (%s): %w", clientcmd.RecommendedConfigPathEnvVar, env, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("in-cluster config: %w", err)
	}
	if home, herr := os.UserHomeDir(); herr == nil {
		path := filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)
		if _, serr := os.Stat(path); serr == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
			}
			return cfg, nil
		}
	}
	return nil, ErrNoConfig
}

// ErrNoConfig is RESTConfig's error when nothing names an API server: no --kubeconfig, no
// $KUBECONFIG, not in a cluster, no ~/.kube/config.
var ErrNoConfig = errors.New("no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run inside a cluster, or create ~/.kube/config")
