//go:build !linux

package bench

func runqueueWait(int) (float64, bool) { return 0, false }

func selfCPUSeconds() (float64, bool) { return 0, false }

func rssBytes(int) (uint64, bool) { return 0, false }
