// Package workload parses the workload of an inbound policy request (PortSpec.workload):
// Linkerd's JSON {"ns":..,"pod":..} or {"ns":..,"external_workload":..}, or the legacy
// "ns:pod".
//
// It is small on purpose (stdlib, apimachinery's name validation and internal/quote, which
// bounds the input its errors show), so that its fuzz target runs fast; it must not import
// client-go, gRPC or the Meridian components: `k8s.io/client-go/...`,
// `google.golang.org/grpc/...`, `policy`, `policy/api`, `policy/compute`, `shard/...`,
// `identity/...`, `injector/...`, `proxy/...`, `bench/...`, `cmd/...`.
//
// Allowed imports: `std`, `k8s.io/apimachinery/pkg/util/validation`, `internal/quote`.
package workload
