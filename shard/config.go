package shard

import (
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
	}
}
