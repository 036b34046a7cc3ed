package source

import (
	"errors"

	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/serverspec"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/translator"
)

// The kinds a source delivers, as written in manifests.
const (
	KindService        = "Service"
	KindEndpointSlice  = "EndpointSlice"
	KindPod            = "Pod"
	KindNode           = "Node"
	KindServer         = "Server"
	KindServiceProfile = "ServiceProfile"
)

// FileError is a problem with one file of a Dir source, printing as "file:line: reason".
type FileError = manifest.FileError

// kindOrder is the order Dir delivers upserts in (deletes go in reverse): Nodes and Servers
// first, so that zones and opaque ports are known when the endpoints arrive, and a slice's
// pods are known when it arrives.
var kindOrder = []string{KindNode, KindServer, KindPod, KindService, KindServiceProfile, KindEndpointSlice}

// dirDecoder decodes the kinds a Dir delivers, in the versions client-go's informers watch:
// Service, Pod and Node of v1, EndpointSlice of discovery.k8s.io/v1, Server of
// policy.linkerd.io v1beta1 to v1beta3, ServiceProfile of linkerd.io v1alpha1 and v1alpha2
// (and their Lists). Each is decoded strictly (unknown
// and duplicate fields are errors), its namespace defaulted to "default" (a Node has none),
// its TypeMeta cleared (as in informer objects), then defaulted and validated (validate.go).
// Nodes, Servers and ServiceProfiles are delivered as their projections
// (translator.ProjectNode, translator.ProjectServer, translator.ProjectServiceProfile). Other kinds are ignored.
var dirDecoder = manifest.NewDecoder(
	manifest.Kind{Kind: KindService, Versions: []string{"v1"}, Decode: decodeService},
	manifest.Kind{Group: "discovery.k8s.io", Kind: KindEndpointSlice, Versions: []string{"v1"}, Decode: decodeEndpointSlice},
	manifest.Kind{Kind: KindPod, Versions: []string{"v1"}, Decode: decodePod},
	manifest.Kind{Kind: KindNode, Versions: []string{"v1"}, Decode: decodeNode},
	manifest.Kind{Group: serverspec.Group, Kind: KindServer, Versions: serverspec.Versions, Decode: decodeServer},
	manifest.Kind{Group: translator.ServiceProfileGroup, Kind: KindServiceProfile, Versions: translator.ServiceProfileVersions, Decode: decodeServiceProfile},
)

// decodeServiceProfile decodes a ServiceProfile, checked as Linkerd's sp-validator checks
// it (translator.CheckServiceProfile), into its projection.
func decodeServiceProfile(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	o := &translator.ServiceProfileObject{}
	p, err := decodeNamespaced(data, o, &o.ObjectMeta)
	if err != nil {
		return manifest.Decoded{}, err
	}
	sp, err := translator.ProjectServiceProfile(o)
	if err != nil && len(p) == 0 {
		p.add("spec", "%v", err)
	}
	return manifest.Decoded{Namespace: o.Namespace, Name: o.Name, Value: sp}, p.err()
}

// decodeNamespaced decodes data strictly into obj, a namespaced object whose metadata is m,
// defaults its namespace and returns the problems of its metadata.
func decodeNamespaced(data []byte, obj any, m *metav1.ObjectMeta) (problems, error) {
	if err := manifest.DecodeStrict(data, obj); err != nil {
		return nil, err
	}
	if m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	var p problems
	validateMeta(&p, m, validation.IsDNS1123Subdomain, true)
	return p, nil
}

func decodeNode(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	n := &corev1.Node{}
	if err := manifest.DecodeStrict(data, n); err != nil {
		return manifest.Decoded{}, err
	}
	var p problems
	if n.Namespace != "" {
		p.add("metadata.namespace", "is %q: a Node has no namespace", n.Namespace)
	}
	n.Namespace = ""
	validateMeta(&p, &n.ObjectMeta, validation.IsDNS1123Subdomain, false)
	got := manifest.Decoded{Name: n.Name, Value: translator.ProjectNode(&n.ObjectMeta)}
	return got, p.err()
}

func decodeServer(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	o := &translator.ServerObject{}
	p, err := decodeNamespaced(data, o, &o.ObjectMeta)
	if err != nil {
		return manifest.Decoded{}, err
	}
	s, err := translator.ProjectServer(o)
	if err != nil {
		// Its message names the field first: placed at that field, not prefixed again.
		return manifest.Decoded{Namespace: o.Namespace, Name: o.Name, Value: s}, errors.Join(p.err(), manifest.FieldOf(err.Error()))
	}
	return manifest.Decoded{Namespace: o.Namespace, Name: o.Name, Value: s}, p.err()
}

func decodeService(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	s := &corev1.Service{}
	return decodeObject(data, s, func() []fieldError { defaultService(s); return validateService(s) })
}

// decodeEndpointSlice decodes and checks an EndpointSlice, which is delivered as its
// projection (translator.SlimEndpointSlice), as the Kubernetes source delivers it.
func decodeEndpointSlice(tm manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	d, err := decodeAPIEndpointSlice(tm, data)
	if es, ok := d.Value.(*discoveryv1.EndpointSlice); ok {
		d.Value = translator.SlimEndpointSlice(es)
	}
	return d, err
}

// decodeAPIEndpointSlice is decodeEndpointSlice before the projection: the API object,
// defaulted and checked.
func decodeAPIEndpointSlice(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	es := &discoveryv1.EndpointSlice{}
	return decodeObject(data, es, func() []fieldError { defaultEndpointSlice(es); return validateEndpointSlice(es) })
}

// decodePod decodes a Pod, defaulted and checked, as its projection (translator.SlimPod).
func decodePod(tm manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	d, err := decodeAPIPod(tm, data)
	if p, ok := d.Value.(*corev1.Pod); ok {
		d.Value = translator.SlimPod(p)
	}
	return d, err
}

// decodeAPIPod is decodePod before the projection: the API object, defaulted and checked.
func decodeAPIPod(_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
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
	p := problems(check())
	return got, p.err()
}

// err returns the problems as field errors joined, or nil when there are none.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	errs := make([]error, len(p))
	for i, f := range p {
		errs[i] = manifest.Field(f.path, "%s", f.msg)
	}
	return errors.Join(errs...)
}
