package gen

import (
	"errors"
	"fmt"
)

// MaxSliceEndpoints is the most endpoints one EndpointSlice holds (the Kubernetes default).
const MaxSliceEndpoints = 100

// MaxSerial is the largest pod serial number: serials are the low 24 bits of 10.0.0.0/8.
const MaxSerial = 1<<24 - 1

// Config describes a synthetic cluster. The same Config always generates the same cluster.
type Config struct {
	Seed                uint64 `json:"seed"`
	Services            int    `json:"services"`
	EndpointsPerService int    `json:"endpoints_per_service"`
	Namespaces          int    `json:"namespaces"`
	// MeshedShare is the fraction (0..1) of pods labelled as meshed, chosen by a hash of the
	// pod's name.
	MeshedShare float64 `json:"meshed_share"`
	// ControlPlaneNamespace is the value of meshed pods' linkerd.io/control-plane-ns label.
	ControlPlaneNamespace string `json:"control_plane_namespace"`
}

// DefaultConfig returns a small cluster: 100 services of 10 endpoints in 10 namespaces, 90%
// meshed.
func DefaultConfig() Config {
	return Config{Seed: 1, Services: 100, EndpointsPerService: 10, Namespaces: 10, MeshedShare: 0.9, ControlPlaneNamespace: "linkerd"}
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Services < 1 {
		errs = append(errs, fmt.Errorf("services must be at least 1, got %d", c.Services))
	}
	if c.EndpointsPerService < 0 {
		errs = append(errs, fmt.Errorf("endpoints per service must not be negative, got %d", c.EndpointsPerService))
	}
	if c.Namespaces < 1 {
		errs = append(errs, fmt.Errorf("namespaces must be at least 1, got %d", c.Namespaces))
	}
	if !(c.MeshedShare >= 0 && c.MeshedShare <= 1) { // and not NaN
		errs = append(errs, fmt.Errorf("meshed share must be within 0..1, got %g", c.MeshedShare))
	}
	if c.ControlPlaneNamespace == "" {
		errs = append(errs, errors.New("control plane namespace must not be empty"))
	}
	// Divided, not multiplied: the product of two large counts overflows.
	if c.Services > 0 && c.EndpointsPerService > MaxSerial/2/c.Services {
		errs = append(errs, fmt.Errorf("%d services of %d endpoints is too many: at most %d endpoints (half the 10.0.0.0/8 serials, the rest are for churn)",
			c.Services, c.EndpointsPerService, MaxSerial/2))
	}
	return errors.Join(errs...)
}
