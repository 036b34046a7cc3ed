package api

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

// TestCRDsOnRealAPIServer applies every fixture to a real kube-apiserver with the CRDs from
// deploy/charts/meridian/crds installed: schema-valid ones are stored, malformed ones are rejected with
// Invalid, exactly as the offline check says.
func TestCRDsOnRealAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			u := decode(t, f.doc)
			if u.GetKind() == "Pod" {
				t.Skip("not a policy resource")
			}
			u.SetNamespace(ns)
			gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
			if err != nil {
				t.Fatal(err)
			}
			gvr := gv.WithResource(resourceName(u.GetKind()))
			_, err = env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
			wantOK := f.schemaOK && f.name != "bad object name"
			switch {
			case wantOK && err != nil:
				t.Fatalf("create rejected: %v", err)
			case !wantOK && err == nil:
				t.Fatalf("malformed object accepted")
			case !wantOK && !apierrors.IsInvalid(err):
				t.Fatalf("want Invalid, got %v", err)
			}
			if err == nil {
				_ = env.Dynamic.Resource(gvr).Namespace(ns).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
		})
	}
}

// TestServerVersionsOnRealAPIServer: a v1beta1 Server is readable as v1beta3 (the storage
// version) with accessPolicy defaulted to deny, and converts to the same model.
func TestServerVersionsOnRealAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u := decode(t, fixtures[findFixture("Server v1beta1")].doc)
	u.SetNamespace(ns)
	if _, err := env.Dynamic.Resource(schema.GroupVersionResource{Group: Group, Version: "v1beta1", Resource: "servers"}).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := env.Dynamic.Resource(Resources[KindServer]).Namespace(ns).Get(ctx, u.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ap, _, _ := unstructuredString(got.Object, "spec", "accessPolicy"); ap != "deny" {
		t.Errorf("accessPolicy = %q, want deny", ap)
	}
	if p, _, _ := unstructuredString(got.Object, "spec", "proxyProtocol"); p != "unknown" {
		t.Errorf("proxyProtocol = %q, want unknown", p)
	}
	if _, err := Convert(got, ""); err != nil {
		t.Errorf("stored object does not convert: %v", err)
	}
}

// resourceName is the plural resource of a policy kind.
func resourceName(kind string) string {
	k := strings.ToLower(kind)
	if strings.HasSuffix(k, "y") {
		return strings.TrimSuffix(k, "y") + "ies"
	}
	return k + "s"
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	return unstructured.NestedString(obj, path...)
}
