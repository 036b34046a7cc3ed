package shard

import (
	"fmt"
	"time"

	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

// Config configures a destination replica.
type Config struct {
	Translator translator.Config
	// QueueCapacity bounds each stream's delta queue (snapshot.Subscription).
	QueueCapacity int
	// Workers is the number of goroutines that recompute dirty services.
	Workers int
	// RetryBudget is sent in every profile.
	RetryRatio        float32
	RetryMinPerSecond uint32
	RetryTTL          time.Duration
	// NonOwner says what to do with a stream for a service another replica owns.
	NonOwner NonOwnerMode
	// ShardKey says what places a service in the ring (every replica must use the same):
	// ShardByService, or ShardByNamespace, in which a Kubernetes source asks the API
	// server for the replica's namespaces only where it can (source.NamespaceSharder).
	ShardKey ShardKey
}

// DefaultConfig returns Linkerd-compatible defaults.
func DefaultConfig() Config {
	return Config{
		Translator:        translator.DefaultConfig(),
		QueueCapacity:     snapshot.DefaultQueueCapacity,
		Workers:           2,
		RetryRatio:        0.2,
		RetryMinPerSecond: 10,
		RetryTTL:          10 * time.Second,
		NonOwner:          Forward,
		ShardKey:          ShardByService,
	}
}

// NonOwnerMode says what a replica does with a stream for a service it does not own.
type NonOwnerMode string

const (
	// Forward relays the stream to the owner, so any unmodified Linkerd proxy works.
	Forward NonOwnerMode = "forward"
	// Redirect refuses with FailedPrecondition naming the owner (see RedirectOwner).
	Redirect NonOwnerMode = "redirect"
)

// ParseNonOwnerMode parses the --non-owner flag.
func ParseNonOwnerMode(s string) (NonOwnerMode, error) {
	switch NonOwnerMode(s) {
	case Forward, Redirect:
		return NonOwnerMode(s), nil
	}
	return "", fmt.Errorf("non-owner mode %q: want forward or redirect", s)
}
