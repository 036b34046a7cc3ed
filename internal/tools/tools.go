//go:build tools

package tools

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/linkerd/linkerd2-proxy-api/go/destination"
	_ "github.com/linkerd/linkerd2-proxy-api/go/identity"
	_ "github.com/linkerd/linkerd2-proxy-api/go/inbound"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/puzpuzpuz/xsync/v3"
	_ "github.com/schollz/progressbar/v3"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
	_ "google.golang.org/grpc"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
