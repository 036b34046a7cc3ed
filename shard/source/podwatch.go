package source

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/translator"
)

// listWatch is the pod informer's list and watch: those of the typed client, passing on only
// what the filter wants (see podShare).
func (ps *podShare) listWatch() cache.ListerWatcher {
	pods := ps.k.clients.Typed.CoreV1().Pods(ps.k.cfg.Namespace)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l, err := pods.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			// The watch is started anew after the list, and may have missed a pod's events
			// (its deletion among them) before it: what it dropped is no longer known to be
			// the latest.
			ps.recent.clear()
			kept := l.Items[:0]
			for i := range l.Items {
				ps.exists(l.Items[i].Namespace + "/" + l.Items[i].Name)
				if ps.wants(&l.Items[i]) {
					kept = append(kept, l.Items[i])
				}
			}
			clear(l.Items[len(kept):])
			l.Items = kept
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			pw := &podWatch{ps: ps, listing: opts.SendInitialEvents != nil && *opts.SendInitialEvents}
			if pw.listing {
				// A watch that lists first (client-go's watch-list), as the reflector opens
				// when it starts or cannot resume: events may have been missed, as before a
				// list.
				ps.recent.clear()
			}
			pw.gen = ps.recent.generation()
			w, err := pods.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return newFilteredWatch(w, pw.filterEvent), nil
		},
	}
}

// podWatch is the state of one pod watch's filter: listing while a watch that lists first
// delivers its initial events (the cluster's pods as additions), which end with a bookmark.
type podWatch struct {
	ps      *podShare
	listing bool
	gen     uint64 // recent's generation when the watch started: an older watch's drops are not kept
}

// filterEvent passes a watch event on when the filter wants its pod, or when it is no
// addition or modification; the addition of an unwanted pod is dropped, and its
// modification becomes the deletion of its placeholder (isDropped).
//
// Every event of a pod replaces what recent holds of it: the projection of the pod it drops
// (unless it is an initial event: a replica that starts or relists names the pods its slices
// name before, and would hold thousands of copies for nothing), else nothing.
func (pw *podWatch) filterEvent(e watch.Event) (watch.Event, bool) {
	ps := pw.ps
	if e.Type == watch.Bookmark {
		if m, err := meta.Accessor(e.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			pw.listing = false
		}
		return e, true
	}
	p, ok := e.Object.(*corev1.Pod)
	if ok && (e.Type == watch.Added || e.Type == watch.Modified || e.Type == watch.Deleted) {
		ps.recent.forget(p.Namespace + "/" + p.Name)
	}
	if ok && (e.Type == watch.Added || e.Type == watch.Modified) {
		ps.exists(p.Namespace + "/" + p.Name)
	}
	if !ok || (e.Type != watch.Added && e.Type != watch.Modified) || ps.wants(p) {
		return e, true
	}
	if !pw.listing {
		ps.recent.put(translator.SlimPod(p), time.Now(), pw.gen)
	}
	if e.Type == watch.Added {
		return e, false
	}
	m := objMeta{name: p.Name, namespace: p.Namespace, resourceVersion: p.ResourceVersion}
	return watch.Event{Type: watch.Deleted, Object: &corev1.Pod{ObjectMeta: reducedMeta(m, dropped)}}, true
}
