package source

import "go.uber.org/zap"

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
