package source

import (
	"context"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serverShards reports whether the share list/watch sends its shard selector: until the API
// server answers one without echoing it.
func (k *Kubernetes) serverShards() bool { return !k.noShards.Load() }

// ServerSharded reports whether the API server has filtered a list by the handler's shard
// selector (NamespaceSharder): it echoed the selector in shardInfo.
func (k *Kubernetes) ServerSharded() bool { return k.sharded.Load() && !k.noShards.Load() }

// shardEcho receives, for each share list sent with a shard selector, whether the response
// echoed shardInfo. The first response without it turns server-side sharding off for the
// life of the source: the API server does not offer it, and the source filters alone.
func (k *Kubernetes) shardEcho(sent string, sharded bool) {
	if sharded {
		if !k.sharded.Swap(true) {
			k.log.Info("the API server shards EndpointSlice lists and watches by namespace (ShardedListAndWatch)", zap.Int("selectorBytes", len(sent)))
		}
		return
	}
	if !k.noShards.Swap(true) {
		k.warn("the API server did not echo the shard selector (is its ShardedListAndWatch feature gate on?): EndpointSlices of every namespace are read, and filtered by the replica")
	}
}

// probeShards lists one object of lw with its shard selector, when the API server's support
// for selectors is not known yet, so that shardEcho learns it.
func (k *Kubernetes) probeShards(lw *shareLW) {
	if k.sharded.Load() || k.noShards.Load() || lw.selector() == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := lw.list(ctx, metav1.ListOptions{Limit: 1}, func(string, string) bool { return false }); err != nil {
		k.log.Warn("cannot ask the API server whether it shards lists", zap.Error(err))
	}
}
