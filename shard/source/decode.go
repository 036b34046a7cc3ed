package source

import (
	"errors"

	"github.com/meridian-mesh/meridian/internal/manifest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The kinds a source delivers, as written in manifests.
const (
	KindService       = "Service"
	KindEndpointSlice = "EndpointSlice"
	KindPod           = "Pod"
)

// FileError is a problem with one file of a Dir source, printing as "file:line: reason".
type FileError = manifest.FileError

// kindOrder is the order Dir delivers upserts in (deletes go in reverse): a slice's pods
// are known when it arrives.
var kindOrder = []string{KindPod, KindService, KindEndpointSlice}

// dirDecoder decodes the kinds a Dir delivers, in the versions client-go's informers watch:
// Service and Pod of v1, EndpointSlice of discovery.k8s.io/v1 (and their Lists). Each is
// decoded strictly (unknown and duplicate fields are errors), its namespace defaulted to
// "default", its TypeMeta cleared (as in informer objects), then defaulted and validated
// (validate.go). Other kinds are ignored.
var dirDecoder = manifest.NewDecoder(
	manifest.Kind{Kind: KindService, Versions: []string{"v1"}, Decode: decodeService},
	manifest.Kind{Group: "discovery.k8s.io", Kind: KindEndpointSlice, Versions: []string{"v1"}, Decode: decodeEndpointSlice},
	manifest.Kind{Kind: KindPod, Versions: []string{"v1"}, Decode: decodePod},
)

func decodeService(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	s := &corev1.Service{}
	return decodeObject(data, s, func() []fieldError { defaultService(s); return validateService(s) })
}

func decodeEndpointSlice(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	es := &discoveryv1.EndpointSlice{}
	return decodeObject(data, es, func() []fieldError { defaultEndpointSlice(es); return validateEndpointSlice(es) })
}

func decodePod(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	p := &corev1.Pod{}
	return decodeObject(data, p, func() []fieldError { defaultPod(p); return validatePod(p) })
}

// kubeObject is what the three kinds have in common.
type kubeObject interface {
	metav1.Object
	runtime.Object
}

// decodeObject decodes data strictly into obj, defaults its namespace, clears its TypeMeta
// and runs check (defaulting, then validation), whose problems become field errors.
func decodeObject(data []byte, obj kubeObject, check func() []fieldError) (manifest.Decoded, error) {
	if err := manifest.DecodeStrict(data, obj); err != nil {
		return manifest.Decoded{}, err
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	got := manifest.Decoded{Namespace: obj.GetNamespace(), Name: obj.GetName(), Value: obj}
	problems := check()
	if len(problems) == 0 {
		return got, nil
	}
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = manifest.Field(p.path, "%s", p.msg)
	}
	return got, errors.Join(errs...)
}
