package source

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// listWatchNoWatchList is a ListWatch whose reflector lists, then watches (no watch-list).
type listWatchNoWatchList struct{ *cache.ListWatch }

func (listWatchNoWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// TestGainedSliceDeletedWhileWatchDown: a slice that Gain's list delivered is in the
// informer's cache, so that when the watch ends (a 410 after an outage) and the re-list no
// longer finds it, its deletion is delivered. It was not cached, and the handler kept it.
func TestGainedSliceDeletedWhileWatchDown(t *testing.T) {
	lw := &shareLW{kind: endpointSliceKind("")}
	var owned atomic.Bool
	want := func(_, svc string) bool { return svc == "a" && owned.Load() }
	lw.want.Store(&want)
	var watches atomic.Int32
	var pw atomic.Pointer[io.PipeWriter]
	inf := cache.NewSharedIndexInformer(listWatchNoWatchList{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return lw.kind.list("1", "", nil), nil // s1 is not there: unwanted first, deleted later
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			r, w := io.Pipe()
			pw.Store(w)
			watches.Add(1)
			return watch.NewStreamWatcher(&shareDecoder{lw: lw, body: r}, apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "test")), nil
		},
	}}, nil, 0, cache.Indexers{})
	if err := inf.SetTransform(lw.slim); err != nil {
		t.Fatal(err)
	}
	lw.cache = inf.GetStore()
	k := &Kubernetes{log: zap.NewNop()}
	rec := newRecorder()
	if _, err := inf.AddEventHandler(eventHandler(k, nil, rec.OnEndpointSlice)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	defer func() {
		cancel()
		if w := pw.Load(); w != nil {
			_ = w.Close()
		}
		wg.Wait()
	}()
	testutil.Eventually(t, 10*time.Second, "the first watch", func() bool { return watches.Load() == 1 })

	// The ring gives this replica service a; Gain's list reads s1 and delivers it.
	owned.Store(true)
	s := bigSlice("ns", "a", 1)
	s.Name = "s1"
	env, err := parseEnvelope(encodeProto(t, s))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := lw.kind.full(env.raw)
	if err != nil {
		t.Fatal(err)
	}
	k.deliverGained(rec, &shareInformer{lw: lw, informer: inf}, "ns/s1", obj)
	if rec.get(KindEndpointSlice+" ns/s1") == nil {
		t.Fatal("Gain did not deliver ns/s1")
	}
	// The watch ends with 410; s1 was deleted meanwhile; the reflector lists again.
	pw.Load().CloseWithError(apierrors.NewResourceExpired("too old"))
	testutil.Eventually(t, 10*time.Second, "the deletion of ns/s1 delivered after the re-list", func() bool {
		return rec.get(KindEndpointSlice+" ns/s1") == nil
	})
}
