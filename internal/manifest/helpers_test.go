package manifest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// thing is the test kinds' object: core "v1 Thing" and "example.com/v1 Widget".
type thing struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Metadata   struct {
		Name      string            `json:"name,omitempty"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Size  int `json:"size,omitempty"`
		Ports []struct {
			Name string `json:"name,omitempty"`
			Port int32  `json:"port"`
		} `json:"ports,omitempty"`
	} `json:"spec"`
}

// decodeThing decodes strictly, defaults the namespace and validates the name and ports; a
// negative size is ignored with a warning.
func decodeThing(_ TypeMeta, data []byte) (Decoded, error) {
	var t thing
	if err := DecodeStrict(data, &t); err != nil {
		return Decoded{}, err
	}
	if t.Metadata.Namespace == "" {
		t.Metadata.Namespace = "default"
	}
	got := Decoded{Namespace: t.Metadata.Namespace, Name: t.Metadata.Name, Value: &t}
	var errs []error
	switch name := t.Metadata.Name; {
	case name == "":
		errs = append(errs, Field("metadata.name", "is empty"))
	case strings.ToLower(name) != name || strings.ContainsAny(name, "_ "):
		errs = append(errs, Field("metadata.name", "%q is invalid: must be lower case", name))
	}
	for i, p := range t.Spec.Ports {
		if p.Port < 1 || p.Port > 65535 {
			errs = append(errs, Field(fmt.Sprintf("spec.ports[%d].port", i), `"%d" is invalid: must be 1-65535`, p.Port))
		}
	}
	if t.Spec.Size < 0 {
		got.Warnings = append(got.Warnings, Field("spec.size", "%d is below 0; ignored", t.Spec.Size))
		t.Spec.Size = 0
	}
	if len(errs) > 0 {
		return got, joinErrs(errs)
	}
	return got, nil
}

func joinErrs(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return &joined{errs}
}

// joined is errors.Join without its newline-separated message, to show that any error with
// Unwrap() []error is split.
type joined struct{ errs []error }

func (j *joined) Error() string   { return fmt.Sprint(j.errs) }
func (j *joined) Unwrap() []error { return j.errs }

var testKinds = []Kind{
	{Group: "", Kind: "Thing", Versions: []string{"v1"}, Decode: decodeThing},
	{Group: "example.com", Kind: "Widget", Versions: []string{"v1", "v2"}, Decode: decodeThing},
}

func testDecoder() *Decoder { return NewDecoder(testKinds...) }

const thingA = `apiVersion: v1
kind: Thing
metadata:
  name: a
  namespace: shop
spec:
  ports:
  - name: http
    port: 80
`

const widgetB = `apiVersion: example.com/v1
kind: Widget
metadata: {name: b, namespace: shop}
spec: {size: 3}
`

func thingYAML(ns, name, label string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Thing\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {from: %q}\nspec: {size: 1}\n", name, ns, label)
}
