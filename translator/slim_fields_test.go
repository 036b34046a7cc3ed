package translator

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// projectionKind ties a kind's field list to its functions and to a base object: a projection
// with every listed field set.
type projectionKind struct {
	name    string
	fields  []string
	base    func() any
	slim    func(any) any
	isSlim  func(any) bool
	project func(any) any
}

var baseTime = metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))

func baseMeta(name string) metav1.ObjectMeta {
	t := baseTime
	return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-1", ResourceVersion: "7",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Time: &t}}}
}

// kindOf is the projectionKind of the API type T, from its functions.
func kindOf[T any](name string, fields []string, base func() T, slim func(T) T, isSlim func(T) bool, project func(T) T) projectionKind {
	return projectionKind{name: name, fields: fields,
		base:    func() any { return base() },
		slim:    func(o any) any { return slim(o.(T)) },
		isSlim:  func(o any) bool { return isSlim(o.(T)) },
		project: func(o any) any { return project(o.(T)) },
	}
}

var projectionKinds = []projectionKind{
	kindOf("Service", serviceFields, baseService, SlimService, IsSlimService, ProjectService),
}

// baseService, baseEndpointSlice and basePod are the base objects: projections with every
// field of their kind's list set.
func baseService() *corev1.Service {
	s := &corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}, ObjectMeta: baseMeta("web")}
	s.Annotations = map[string]string{AnnotationOpaquePorts: "3306"}
	local := corev1.ServiceInternalTrafficPolicyLocal
	s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ExternalName: "x.example", ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
		InternalTrafficPolicy: &local,
		Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")}}}
	return s
}

func baseEndpointSlice() *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"}, ObjectMeta: baseMeta("web-1"),
		AddressType: v4, Ports: []discoveryv1.EndpointPort{eport("http", 8080)}}
	es.Labels = map[string]string{LabelServiceName: "web", LabelRemoteClusterName: "east"}
	es.Annotations = map[string]string{AnnotationRemoteGatewayIdentity: "gw.east", AnnotationRemoteServiceFQName: "web.ns.svc.east.local"}
	es.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Hostname: ptr("web-0"), Zone: ptr("z1"),
		Hints:     &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z1"}}},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-0"}}}
	return es
}

func basePod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: baseMeta("web-abc-1")}
	p.ManagedFields[0] = metav1.ManagedFieldsEntry{Time: p.ManagedFields[0].Time} // its time only
	p.Labels = map[string]string{"*": "every label is kept"}
	deleted := metav1.NewTime(baseTime.Add(time.Minute))
	p.DeletionTimestamp = &deleted
	p.Annotations = map[string]string{AnnotationOpaquePorts: "http", AnnotationSkipInboundPorts: "9090"}
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-abc", Controller: ptr(true)}}
	p.Spec.ServiceAccountName = "web"
	p.Spec.NodeName = "node-1"
	p.Spec.HostNetwork = true
	proxyEnv := []corev1.EnvVar{{Name: EnvInboundListenAddr, Value: "[::]:4243"}}
	p.Spec.InitContainers = []corev1.Container{{Name: ProxyContainerName, Env: proxyEnv, Ports: []corev1.ContainerPort{{Name: "linkerd-admin", ContainerPort: 4191}}}}
	p.Spec.Containers = []corev1.Container{{Name: ProxyContainerName, Env: proxyEnv, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}
	return p
}

// TestProjectionFields checks each kind's projection against its field list, over every field
// of the API type: the base object (every listed field set) is a projection and its fields
// are exactly the list; and for every other field (and every other map entry), the base with
// that field set is not slim, and its projection is the base again, so the field is dropped and
// nothing else changes.
func TestProjectionFields(t *testing.T) {
	for _, k := range projectionKinds {
		t.Run(k.name, func(t *testing.T) {
			base := k.base()
			if got, want := presentPaths(base), sorted(k.fields); !slices.Equal(got, want) {
				t.Fatalf("the base object sets\n%q\nthe list is\n%q", got, want)
			}
			if !k.isSlim(base) || !reflect.DeepEqual(k.slim(base), base) || k.project(base) != base {
				t.Fatalf("the base object is not a projection: its Slim%s sets %q", k.name, presentPaths(k.slim(base)))
			}
			if Project(base) != base {
				t.Fatal("Project copies a projection")
			}
			n := 0
			for _, l := range leaves(reflect.TypeOf(base).Elem()) {
				if slices.Contains(k.fields, l.path) {
					continue // a map listed as "[*]" keeps every entry: its leaf path is kept
				}
				n++
				obj := reflect.ValueOf(k.base())
				setLeaf(obj.Elem(), l.steps)
				if reflect.DeepEqual(obj.Interface(), base) {
					t.Fatalf("%s: setting it changes nothing", l.path)
				}
				if k.isSlim(obj.Interface()) {
					t.Errorf("%s: IsSlim%s says slim with it set", l.path, k.name)
				}
				if got := k.slim(obj.Interface()); !reflect.DeepEqual(got, base) {
					t.Errorf("%s: Slim%s keeps it (or changes something else): it sets %q", l.path, k.name, presentPaths(got))
				}
				if p := Project(obj.Interface()); p == obj.Interface() || !reflect.DeepEqual(p, base) {
					t.Errorf("%s: Project keeps it", l.path)
				}
			}
			t.Logf("%d fields kept, %d dropped", len(k.fields), n)
		})
	}
}

// A step of a path into an object: a struct field, the pointed-to value, the first element
// of a list (created when the list is empty), or the entry otherKey of a map.
type step struct {
	kind  byte // 'f' field, 'p' pointer, 'e' element, 'm' map entry
	field int
}

const otherKey = "meridian.test/other"

type leaf struct {
	path  string
	steps []step
}

// leaves returns the leaves of type t: every scalar field, list element and map value, and
// the apimachinery values handled whole (times, quantities, int-or-strings, raw bytes).
func leaves(t reflect.Type) []leaf {
	var out []leaf
	var walk func(t reflect.Type, path string, steps []step, seen []reflect.Type)
	walk = func(t reflect.Type, path string, steps []step, seen []reflect.Type) {
		if wholeValue(t) {
			out = append(out, leaf{path, slices.Clone(steps)})
			return
		}
		if slices.Contains(seen, t) {
			panic("recursive type " + t.String() + " at " + path)
		}
		seen = append(seen, t)
		switch t.Kind() {
		case reflect.Pointer:
			walk(t.Elem(), path, append(steps, step{kind: 'p'}), seen)
		case reflect.Slice:
			walk(t.Elem(), path+"[]", append(steps, step{kind: 'e'}), seen)
		case reflect.Map:
			walk(t.Elem(), path+"[*]", append(steps, step{kind: 'm'}), seen)
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() {
					panic("unexported field " + f.Name + " of " + t.String() + " at " + path)
				}
				name, inline := jsonName(f)
				p := path
				if !inline {
					p = strings.TrimPrefix(path+"."+name, ".")
				}
				walk(f.Type, p, append(steps, step{kind: 'f', field: i}), seen)
			}
		case reflect.Interface, reflect.Func, reflect.Chan:
			panic("cannot walk " + t.String() + " at " + path)
		default:
			out = append(out, leaf{path, slices.Clone(steps)})
		}
	}
	walk(t, "", nil, nil)
	return out
}

func wholeValue(t reflect.Type) bool {
	switch t {
	case reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime](), reflect.TypeFor[resource.Quantity](),
		reflect.TypeFor[intstr.IntOrString](), reflect.TypeFor[[]byte]():
		return true
	}
	return false
}

func jsonName(f reflect.StructField) (string, bool) {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "" && f.Anonymous {
		return "", true
	}
	if tag == "" || tag == "-" {
		return f.Name, false
	}
	return tag, false
}

// setLeaf sets the leaf at steps under v (addressable) to a non-zero value, creating what
// leads to it.
func setLeaf(v reflect.Value, steps []step) {
	for i, s := range steps {
		switch s.kind {
		case 'f':
			v = v.Field(s.field)
		case 'p':
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		case 'e':
			if v.Len() == 0 {
				v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			}
			v = v.Index(0)
		case 'm':
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			val := reflect.New(v.Type().Elem()).Elem()
			setLeaf(val, steps[i+1:])
			v.SetMapIndex(reflect.ValueOf(otherKey).Convert(v.Type().Key()), val)
			return
		}
	}
	switch v.Type() {
	case reflect.TypeFor[metav1.Time]():
		v.Set(reflect.ValueOf(metav1.NewTime(baseTime.Add(time.Hour))))
	case reflect.TypeFor[metav1.MicroTime]():
		v.Set(reflect.ValueOf(metav1.NewMicroTime(baseTime.Add(time.Hour))))
	case reflect.TypeFor[resource.Quantity]():
		v.Set(reflect.ValueOf(resource.MustParse("7")))
	case reflect.TypeFor[intstr.IntOrString]():
		v.Set(reflect.ValueOf(intstr.FromString("set")))
	case reflect.TypeFor[[]byte]():
		v.SetBytes([]byte("set"))
	default:
		switch v.Kind() {
		case reflect.String:
			v.SetString("set")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(7)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(7)
		case reflect.Float32, reflect.Float64:
			v.SetFloat(7)
		default:
			panic("cannot set " + v.Type().String())
		}
	}
}

// presentPaths returns the sorted paths of the non-zero leaves of obj, with map entries by
// key ("metadata.labels[k]").
func presentPaths(obj any) []string {
	set := map[string]bool{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		if wholeValue(v.Type()) {
			if !v.IsZero() {
				set[path] = true
			}
			return
		}
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i), path+"[]")
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				walk(v.MapIndex(k), path+"["+k.String()+"]")
			}
		case reflect.Struct:
			for i := range v.NumField() {
				name, inline := jsonName(v.Type().Field(i))
				p := path
				if !inline {
					p = strings.TrimPrefix(path+"."+name, ".")
				}
				walk(v.Field(i), p)
			}
		default:
			if !v.IsZero() {
				set[path] = true
			}
		}
	}
	walk(reflect.ValueOf(obj), "")
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// TestSliceProjectionFields and TestPodProjectionFields check the EndpointSlice and Pod
// projections, types of their own, against sliceFields and podFields (checkOwnProjection).
func TestSliceProjectionFields(t *testing.T) {
	checkOwnProjection(t, sliceFields, baseEndpointSlice, SlimEndpointSlice, unslim)
}

func TestPodProjectionFields(t *testing.T) {
	checkOwnProjection(t, podFields, basePod, SlimPod, unslimPod)
}

// checkOwnProjection checks a projection of a type of its own (slim, with unslim its API
// object) against fields, over every field of the API type T: the base object sets exactly
// the listed fields, and its projection holds them all (unslim of it is the base again); and
// for every other field (and every other map entry), the base with that field set projects
// as the base does, so the field is dropped.
func checkOwnProjection[T, P any](t *testing.T, fields []string, base func() *T, slim func(*T) P, unslim func(P) *T) {
	t.Helper()
	b := base()
	if got, want := presentPaths(b), sorted(fields); !slices.Equal(got, want) {
		t.Fatalf("the base object sets\n%q\nthe list is\n%q", got, want)
	}
	want := slim(b)
	if back := unslim(want); !reflect.DeepEqual(back, b) {
		t.Fatalf("the projection does not keep every listed field: it holds %q", presentPaths(back))
	}
	n := 0
	for _, l := range leaves(reflect.TypeFor[T]()) {
		if slices.Contains(fields, l.path) {
			continue // a map listed as "[*]" keeps every entry: its leaf path is kept
		}
		n++
		obj := base()
		setLeaf(reflect.ValueOf(obj).Elem(), l.steps)
		if reflect.DeepEqual(obj, b) {
			t.Fatalf("%s: setting it changes nothing", l.path)
		}
		if got := slim(obj); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the projection keeps it (or changes something else): it holds %q", l.path, presentPaths(unslim(got)))
		}
	}
	t.Logf("%d fields kept, %d dropped", len(fields), n)
}
