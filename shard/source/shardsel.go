package source

// shardSelector is the server-side shard selector the share list/watch sends ("" none).
func (k *Kubernetes) shardSelector() string { return "" }

// shardEcho receives the shardInfo echo of every share list.
func (k *Kubernetes) shardEcho(string, bool) {}
