// Package workload parses the workload of an inbound policy request (PortSpec.workload):
// Linkerd's JSON {"ns":..,"pod":..} or {"ns":..,"external_workload":..}, or the legacy
// "ns:pod".
//
// It is small on purpose (stdlib and apimachinery's name validation only), so that its fuzz
// target runs fast; it must not import client-go, gRPC or other Meridian packages:
// `k8s.io/client-go/...`, `google.golang.org/grpc/...`, `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`, `k8s.io/apimachinery/pkg/util/validation`.
package workload
