package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// The CRDs in deploy/charts/meridian/crds are checked offline here with the API server's own code (CRD
// validation, structural schema, defaulting, pruning, OpenAPI and CEL validation), so a
// broken CRD is caught even where no API server binary exists; crd_kube_test.go applies them
// to a real one.

// policyCRDs loads deploy/charts/meridian/crds/policy-*.yaml (the Helm chart's crds/ folder).
func policyCRDs(t testing.TB) []*apiextv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(kubetest.RepoRoot(), "deploy", "charts", "meridian", "crds", "policy-*.yaml"))
	if err != nil || len(files) != 5 {
		t.Fatalf("want 5 policy CRDs, found %v (%v)", files, err)
	}
	var out []*apiextv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	return out
}

func internalCRD(t testing.TB, crd *apiextv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	scheme := runtime.NewScheme()
	apiextinstall.Install(scheme)
	v1 := crd.DeepCopy()
	scheme.Default(v1)
	out := &apiextensions.CustomResourceDefinition{}
	if err := scheme.Convert(v1, out, nil); err != nil {
		t.Fatalf("convert %s: %v", crd.Name, err)
	}
	return out
}

func TestCRDsAreValid(t *testing.T) {
	for _, crd := range policyCRDs(t) {
		in := internalCRD(t, crd)
		if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), in); len(errs) > 0 {
			t.Errorf("%s: %v", crd.Name, errs.ToAggregate())
		}
	}
}

// schemaValidator validates objects of one CRD version as the API server does on create.
type schemaValidator struct {
	structural *schema.Structural
	openapi    apivalidation.SchemaValidator
	cel        *cel.Validator
}

func validators(t testing.TB) map[string]*schemaValidator {
	t.Helper()
	out := map[string]*schemaValidator{}
	for _, crd := range policyCRDs(t) {
		in := internalCRD(t, crd)
		for _, v := range in.Spec.Versions {
			// Conversion to the internal type hoists a schema shared by all versions.
			var props *apiextensions.JSONSchemaProps
			if v.Schema != nil {
				props = v.Schema.OpenAPIV3Schema
			} else {
				props = in.Spec.Validation.OpenAPIV3Schema
			}
			s, err := schema.NewStructural(props)
			if err != nil {
				t.Fatalf("%s %s: %v", crd.Name, v.Name, err)
			}
			sv, _, err := apivalidation.NewSchemaValidator(props)
			if err != nil {
				t.Fatalf("%s %s: %v", crd.Name, v.Name, err)
			}
			key := in.Spec.Group + "/" + v.Name + "/" + in.Spec.Names.Kind
			out[key] = &schemaValidator{structural: s, openapi: sv, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
		}
	}
	return out
}

// validate prunes, defaults and validates obj in place; it returns the schema errors.
func (v *schemaValidator) validate(obj map[string]any) field.ErrorList {
	pruning.Prune(obj, v.structural, true)
	defaulting.Default(obj, v.structural)
	errs := apivalidation.ValidateCustomResource(nil, obj, v.openapi)
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

func validatorFor(vs map[string]*schemaValidator, obj map[string]any) (*schemaValidator, error) {
	av, _ := obj["apiVersion"].(string)
	k, _ := obj["kind"].(string)
	v := vs[av+"/"+k]
	if v == nil {
		return nil, fmt.Errorf("no CRD serves %s %s", av, k)
	}
	return v, nil
}
