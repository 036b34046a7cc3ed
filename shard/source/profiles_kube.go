package source

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/translator"
)

// serviceProfileGVR is the storage version of Linkerd's ServiceProfile.
var serviceProfileGVR = schema.GroupVersionResource{Group: translator.ServiceProfileGroup, Version: "v1alpha2", Resource: "serviceprofiles"}

// profileFetcher reads the ServiceProfiles a replica wants, and only those. A metadata
// informer follows every ServiceProfile's name and version (a few dozen bytes each); when
// one the handler wants (ProfileFilter: a profile of a service the replica owns) changes, a
// worker reads it whole with a GET and delivers translator's projection of it. The queue
// holds each profile's key at most once and hands a key to one worker at a time, so the GET
// that follows the last change of a profile is the last one delivered. A GET that fails for
// another reason than the profile's absence is retried with backoff (keyQueue: 5ms doubling
// to 5 minutes), until it succeeds or the profile goes.
type profileFetcher struct {
	k     *Kubernetes
	h     ProfileHandler
	want  func(namespace, name string) bool
	store cache.Store // the metadata informer's
	queue *keyQueue
	wg    sync.WaitGroup
}

// profileKinds returns the ServiceProfile metadata informer (as an informerKind whose
// handler feeds the fetcher), its factory's start and stop, and the fetcher; none when the
// clients or the CRD are missing (a warning says so), or when h wants no profiles.
func (k *Kubernetes) profileKinds(h Handler) (*informerKind, func(<-chan struct{}), func(), *profileFetcher) {
	ph, ok := h.(ProfileHandler)
	if !ok || k.clients.Metadata == nil || k.clients.Dynamic == nil {
		return nil, nil, nil, nil
	}
	if err := k.served(serviceProfileGVR); err != nil {
		k.warn(fmt.Sprintf("ServiceProfiles (%s) are not read, so profiles have no routes: %v", serviceProfileGVR.GroupResource(), err))
		return nil, nil, nil, nil
	}
	f := &profileFetcher{k: k, h: ph, want: func(string, string) bool { return true }, queue: newKeyQueue()}
	if pf, ok := h.(ProfileFilter); ok {
		f.want = pf.WantsProfile
	}
	factory := metadatainformer.NewFilteredSharedInformerFactory(k.clients.Metadata, 0, k.cfg.Namespace, nil)
	inf := factory.ForResource(serviceProfileGVR).Informer()
	if err := inf.SetTransform(slimProfileMeta); err != nil {
		k.warn(fmt.Sprintf("ServiceProfiles are not read: %v", err))
		return nil, nil, nil, nil
	}
	f.store = inf.GetStore()
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(metav1.Object); ok && f.want(m.GetNamespace(), m.GetName()) {
			f.queue.add(m.GetNamespace() + "/" + m.GetName())
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		DeleteFunc: enqueue,
		UpdateFunc: func(o, n any) {
			if om, ok := o.(metav1.Object); ok {
				if nm, ok := n.(metav1.Object); ok && om.GetResourceVersion() == nm.GetResourceVersion() {
					return
				}
			}
			enqueue(n)
		},
	}
	return &informerKind{name: "serviceprofiles", informer: inf, handler: handler}, factory.Start, factory.Shutdown, f
}

// slimProfileMeta keeps of a ServiceProfile's metadata its identity only.
func slimProfileMeta(obj any) (any, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		if m, ok := o.Obj.(*metav1.PartialObjectMetadata); ok {
			o.Obj = profileMeta(m)
		}
		return o, nil
	case *metav1.PartialObjectMetadata:
		return profileMeta(o), nil
	}
	return obj, nil
}

func profileMeta(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	if len(m.Labels) == 0 && len(m.Annotations) == 0 && len(m.ManagedFields) == 0 && len(m.OwnerReferences) == 0 &&
		len(m.Finalizers) == 0 && m.CreationTimestamp.IsZero() && m.Generation == 0 {
		return m
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}}
}

// profileWorkers is the number of GETs of ServiceProfiles in flight: a replica that starts,
// or gains a share, reads every profile of its services, one request each.
const profileWorkers = 8

// run processes the queue on profileWorkers goroutines until ctx ends, and then waits for
// them. The queue hands a key to one worker at a time.
func (f *profileFetcher) run(ctx context.Context) {
	for range profileWorkers {
		f.wg.Go(func() {
			for f.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	f.queue.close()
	f.wg.Wait()
}

func (f *profileFetcher) next(ctx context.Context) bool {
	key, ok := f.queue.get()
	if !ok {
		return false
	}
	err := f.fetch(ctx, key)
	if err != nil && ctx.Err() == nil {
		f.k.log.Warn("cannot read a ServiceProfile; retrying", zap.String("profile", key), zap.Error(err))
	}
	f.queue.done(key, err != nil)
	return true
}

// fetch delivers the current state of the profile key: its deletion when the informer no
// longer has it (or the API server says it is gone), else its projection, read whole.
func (f *profileFetcher) fetch(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key the informer makes: nothing to fetch
	}
	gone := &translator.ServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, ok, _ := f.store.GetByKey(key); !ok {
		f.deliver(gone, true)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u, err := f.k.clients.Dynamic.Resource(serviceProfileGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		f.deliver(gone, true)
		return nil
	}
	if err != nil {
		return err
	}
	sp, err := translator.ServiceProfileFromUnstructured(u.Object)
	switch {
	case sp == nil:
		f.k.log.Warn("object of the ServiceProfile informer ignored", zap.String("profile", key), zap.Error(err))
		return nil
	case err != nil:
		f.k.log.Warn("invalid ServiceProfile: it is not served; the last good version stays in effect", zap.String("profile", key), zap.Error(err))
	}
	f.deliver(sp, false)
	return nil
}

func (f *profileFetcher) deliver(sp *translator.ServiceProfile, deleted bool) {
	f.k.deliverMu.Lock()
	defer f.k.deliverMu.Unlock()
	f.h.OnServiceProfile(sp, deleted)
}

// idle reports whether no profile waits to be read.
func (f *profileFetcher) idle() bool { return f.queue.idle() }

// replay queues every profile the handler wants and waits until they are delivered (or ctx
// ends).
func (f *profileFetcher) replay(ctx context.Context) error {
	for _, key := range f.store.ListKeys() {
		if ns, name, err := cache.SplitMetaNamespaceKey(key); err == nil && f.want(ns, name) {
			f.queue.add(key)
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !f.idle() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
