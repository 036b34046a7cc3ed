package kube

import (
	"testing"

	"k8s.io/client-go/rest"
)

// TestClientsForRate: clients of a config without a rate get DefaultQPS and DefaultBurst
// (client-go's 5 a second would throttle the destination's reads of ServiceProfiles); a rate
// the config sets is kept.
func TestClientsForRate(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:1"}
	c, err := ClientsFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.QPS != DefaultQPS || c.Config.Burst != DefaultBurst {
		t.Errorf("QPS %v, burst %d; want %v, %d", c.Config.QPS, c.Config.Burst, float32(DefaultQPS), DefaultBurst)
	}
	set := &rest.Config{Host: "https://127.0.0.1:1", QPS: 7, Burst: 9}
	if c, err = ClientsFor(set); err != nil {
		t.Fatal(err)
	}
	if c.Config.QPS != 7 || c.Config.Burst != 9 {
		t.Errorf("QPS %v, burst %d; want the config's 7, 9", c.Config.QPS, c.Config.Burst)
	}
}
