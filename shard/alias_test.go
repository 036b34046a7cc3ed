package shard

import "github.com/meridian-mesh/meridian/snapshot"

type (
	snapshotKey      = snapshot.Key
	snapshotSnapshot = snapshot.Snapshot
)
