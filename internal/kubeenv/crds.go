package kubeenv

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// installCRDs creates the CustomResourceDefinitions of the *.yaml files at the root of fsys
// (one document each) and waits, at most timeout, until each is established and its
// resource is in discovery.
func installCRDs(ctx context.Context, cfg *rest.Config, fsys fs.FS, timeout time.Duration) error {
	crds, err := readCRDs(fsys)
	if err != nil {
		return err
	}
	client, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, crd := range crds {
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("install CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitServed(ctx, client, disc, crd); err != nil {
			return err
		}
	}
	return nil
}

// readCRDs decodes the *.yaml files at the root of fsys, in name order.
func readCRDs(fsys fs.FS) ([]*apiextv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextv1.CustomResourceDefinition
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, fmt.Errorf("CRD file %s: %w", path.Base(name), err)
		}
		if crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
			return nil, fmt.Errorf("CRD file %s: kind %q, name %q: not a CustomResourceDefinition", path.Base(name), quote(crd.Kind), quote(crd.Name))
		}
		out = append(out, crd)
	}
	return out, nil
}

// waitServed waits until crd is established and every served version's resource is in
// discovery.
func waitServed(ctx context.Context, client apiextclient.Interface, disc discovery.DiscoveryInterface, crd *apiextv1.CustomResourceDefinition) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := served(ctx, client, disc, crd)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not served: %s: %w", crd.Name, why, ctx.Err())
		case <-tick.C:
		}
	}
}

func served(ctx context.Context, client apiextclient.Interface, disc discovery.DiscoveryInterface, want *apiextv1.CustomResourceDefinition) (bool, string) {
	got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	established := false
	for _, c := range got.Status.Conditions {
		if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		return false, "not established"
	}
	for _, v := range got.Spec.Versions {
		if !v.Served {
			continue
		}
		list, err := disc.ServerResourcesForGroupVersion(got.Spec.Group + "/" + v.Name)
		if err != nil {
			return false, err.Error()
		}
		found := false
		for _, r := range list.APIResources {
			found = found || r.Name == got.Spec.Names.Plural
		}
		if !found {
			return false, fmt.Sprintf("%s/%s has no resource %s yet", got.Spec.Group, v.Name, got.Spec.Names.Plural)
		}
	}
	return true, ""
}
