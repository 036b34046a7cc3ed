package source

import (
	"sync"
	"sync/atomic"

	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
	"github.com/meridian-mesh/meridian/translator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recorder is a Handler that records calls; it never blocks.
type recorder struct {
	manifesttest.Events
	mu   sync.Mutex
	last map[string]metav1.Object
	// gone holds the object of each key's last deletion.
	gone map[string]metav1.Object
}

func newRecorder() *recorder {
	return &recorder{last: map[string]metav1.Object{}, gone: map[string]metav1.Object{}}
}

func (r *recorder) record(kind string, o metav1.Object, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := kind + " " + o.GetNamespace() + "/" + o.GetName()
	if deleted {
		r.Add("-" + key)
		delete(r.last, key)
		r.gone[key] = o
		return
	}
	r.Add("+" + key)
	r.last[key] = o
}

func (r *recorder) OnService(s *corev1.Service, deleted bool) { r.record(KindService, s, deleted) }
func (r *recorder) OnEndpointSlice(es *translator.EndpointSlice, deleted bool) {
	r.record(KindEndpointSlice, es, deleted)
}
func (r *recorder) OnPod(p *translator.Pod, deleted bool) { r.record(KindPod, p, deleted) }

// deletedAs returns the object of key's last deletion.
func (r *recorder) deletedAs(key string) metav1.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone[key]
}

func (r *recorder) get(key string) metav1.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[key]
}

func (r *recorder) OnNode(n *metav1.PartialObjectMetadata, deleted bool) {
	r.record(KindNode, n, deleted)
}
func (r *recorder) OnServer(s *translator.Server, deleted bool) { r.record(KindServer, s, deleted) }

func (r *recorder) OnServiceProfile(p *translator.ServiceProfile, deleted bool) {
	r.record(KindServiceProfile, p, deleted)
}

// profileRecorder is a recorder that wants the ServiceProfiles whose names want accepts.
type profileRecorder struct {
	*recorder
	want atomic.Pointer[func(name string) bool]
}

func (r *profileRecorder) WantsProfile(_, name string) bool { return (*r.want.Load())(name) }

// setWant replaces the filter. It stores a copy: a pointer to the caller's variable would race
// with its next assignment.
func (r *profileRecorder) setWant(f func(name string) bool) { r.want.Store(&f) }
