package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestWatchSentWithAnOldSelectorEnds: a ring change sets the new shard selector and then
// restarts the watch (restartWatch). When the watch's request was on its way at that moment,
// there was no watch to end yet, and the watch that then opened followed the old share until
// the API server closed it, minutes later: the gained namespaces' changes were missed
// meanwhile (TestShardedListKubernetes timed out so, once, under load). Here the API server
// holds the watch's response until the selector has changed and restartWatch has run; the
// watch must then end by itself, so that the reflector watches again with the new selector.
func TestWatchSentWithAnOldSelectorEnds(t *testing.T) {
	requested := make(chan string, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			http.Error(w, "this server only watches", http.StatusBadRequest)
			return
		}
		select {
		case requested <- r.URL.Query().Get("shardSelector"):
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", protobufType+";stream=watch")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a watch that stays open, with no event, until the client goes
	}))
	defer srv.Close()
	rc, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/api", ContentConfig: rest.ContentConfig{
		GroupVersion: &schema.GroupVersion{Version: "v1"}, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	var sel atomic.Pointer[string]
	old, gained := "shardRange(object.metadata.namespace, '0x0', '0x1')", "shardRange(object.metadata.namespace, '0x0', '0x2')"
	sel.Store(&old)
	lw := &shareLW{client: rc, kind: endpointSliceKind(""), selector: func() string { return *sel.Load() }}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type opened struct {
		w   watch.Interface
		err error
	}
	res := make(chan opened, 1)
	go func() {
		w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
		res <- opened{w, err}
	}()
	if got := testutil.Recv(t, requested, 10*time.Second, "the watch's request"); got != old {
		t.Fatalf("the watch asked for %q, want %q", got, old)
	}
	sel.Store(&gained)
	lw.restartWatch() // no watch to end yet: its response has not arrived
	close(release)
	o := testutil.Recv(t, res, 10*time.Second, "the watch to open")
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.w.Stop()
	select {
	case ev, ok := <-o.w.ResultChan():
		if ok {
			t.Fatalf("the watch sent an event: %v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a watch requested with the selector before the change still runs 10s after it")
	}
}
