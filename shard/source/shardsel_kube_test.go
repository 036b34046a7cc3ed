package source

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/sharding"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

// nsRecorder is a recorder that wants the services of some namespaces, and asks the API
// server for those namespaces only (NamespaceSharder: one one-hash range per namespace).
type nsRecorder struct {
	*recorder
	owned atomic.Pointer[map[string]bool]
}

func (r *nsRecorder) set(nss ...string) {
	m := map[string]bool{}
	for _, ns := range nss {
		m[ns] = true
	}
	r.owned.Store(&m)
}

func (r *nsRecorder) WantsService(ns, _ string) bool { return (*r.owned.Load())[ns] }

func (r *nsRecorder) ShardSelector() string { return nsSelector(*r.owned.Load()) }

// nsSelector selects exactly the namespaces of owned, by their hash as the API server
// computes it.
func nsSelector(owned map[string]bool) string {
	var terms []string
	for ns := range owned {
		h, err := strconv.ParseUint(sharding.HashField(ns), 16, 64)
		if err != nil {
			panic(err)
		}
		terms = append(terms, fmt.Sprintf("shardRange(object.metadata.namespace, '0x%016x', '0x%016x')", h, h+1))
	}
	return strings.Join(terms, " || ")
}

func (k *Kubernetes) sliceReads() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.shares {
		if s.lw.kind.kind == "EndpointSlice" {
			return s.lw.read.Load()
		}
	}
	return 0
}

// TestShardedListKubernetes runs the source with a handler that wants some namespaces and
// gives their shard selector, against an API server with the ShardedListAndWatch gate on
// (the server sends only those namespaces' slices, and echoes the selector) and off (the
// source sees no echo, stops sending the selector, and filters alone). Either way only the
// wanted slices are delivered, and a gained namespace is loaded and then followed.
func TestShardedListKubernetes(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate=%v", gate), func(t *testing.T) {
			opts := kubetest.Options{}
			if gate {
				opts.FeatureGates = "ShardedListAndWatch=true"
			}
			env := kubetest.StartWith(t, opts)
			ctx := apiCtx(t)
			var nss []string
			for range 4 {
				ns := env.Namespace(t, nil)
				nss = append(nss, ns)
				create(t, ctx, env.Client, testService(ns, "web"), testSlice(ns, "web-s", "web", "10.3.0.1"))
			}
			src := NewKubernetes(env.Client, KubernetesConfig{}, prometheus.NewRegistry(), zaptest.NewLogger(t))
			rec := &nsRecorder{recorder: newRecorder()}
			rec.set(nss[0], nss[1])
			testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, rec) })
			testutil.Eventually(t, apiTimeout, "informers to sync", src.Synced)

			for i, ns := range nss {
				got := rec.get(KindEndpointSlice+" "+ns+"/web-s") != nil
				if got != (i < 2) {
					t.Fatalf("namespace %d (%s): slice delivered %v, want %v", i, ns, got, i < 2)
				}
			}
			if src.ServerSharded() != gate {
				t.Fatalf("ServerSharded = %v with the gate %v", src.ServerSharded(), gate)
			}
			reads := src.sliceReads()
			if gate && reads != 2 {
				t.Fatalf("the sharded list read %d slices, want the 2 wanted", reads)
			}
			if !gate {
				if reads < 4 {
					t.Fatalf("the unsharded list read %d slices, want every one", reads)
				}
				if w := strings.Join(src.Warnings(), "; "); !strings.Contains(w, "ShardedListAndWatch") {
					t.Fatalf("no warning about the missing shard echo: %q", w)
				}
			}

			// Gain the third namespace: its slice is loaded, then its changes followed.
			before := *rec.owned.Load()
			rec.set(nss[0], nss[1], nss[2])
			if err := src.Gain(ctx, Gained{Before: func(ns, _ string) bool { return before[ns] }, ShardSelector: nsSelector(map[string]bool{nss[2]: true})}); err != nil {
				t.Fatal(err)
			}
			key := KindEndpointSlice + " " + nss[2] + "/web-s"
			if rec.get(key) == nil {
				t.Fatal("Gain did not deliver the gained namespace's slice")
			}
			updateSlice(t, env, nss[2], "web-s", "10.3.0.1", "10.3.0.2")
			testutil.Eventually(t, apiTimeout, "the gained slice's update", func() bool {
				es, _ := rec.get(key).(*translator.EndpointSlice)
				return es != nil && len(es.Endpoints) == 2
			})
		})
	}
}
