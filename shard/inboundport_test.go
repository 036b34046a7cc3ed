package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/translator"
)

// proxyPod is a running meshed pod of shop whose proxy container's environment gives the
// inbound address listen ("" for no such variable), as the injector writes it for
// config.linkerd.io/proxy-inbound-port.
func proxyPod(name, ip, listen string) *translator.Pod {
	proxy := corev1.Container{Name: translator.ProxyContainerName}
	if listen != "" {
		proxy.Env = []corev1.EnvVar{{Name: "LINKERD2_PROXY_LOG", Value: "warn"}, {Name: translator.EnvInboundListenAddr, Value: listen}}
	}
	return translator.SlimPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"linkerd.io/control-plane-ns": "linkerd"}},
		Spec:       corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app"}, proxy}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	})
}

// transportPorts returns each address of an Add with its opaque-transport port.
func transportPorts(t *testing.T, u *pb.Update) map[string]uint32 {
	t.Helper()
	out := map[string]uint32{}
	for _, a := range u.GetAdd().GetAddrs() {
		ap, err := wire.ToAddrPort(a.GetAddr())
		if err != nil {
			t.Fatal(err)
		}
		out[ap.Addr().String()] = a.GetProtocolHint().GetOpaqueTransport().GetInboundPort()
	}
	return out
}

// TestProxyInboundPort: the opaque-transport port of a meshed endpoint is its proxy's inbound
// port, read from the proxy container's LINKERD2_PROXY_INBOUND_LISTEN_ADDR as linkerd2's
// endpoint translator reads it (getInboundPort; its tests' pods carry the variable), for a
// Get on an opaque port, in the transport-header mode, and for a pod IP's profile; a pod
// whose proxy gives none (or an unreadable one) gets the configured port, and a change of
// the variable is sent. (The sources' part, that a pod keeps the variable's port in its
// projection, is checked for each source in shard/source and translator.)
func TestProxyInboundPort(t *testing.T) {
	for _, mode := range []string{translator.TransportTransparent, translator.TransportHeader} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				c.Translator.OutboundTransportMode = mode
				c.Translator.InboundProxyPort = 4150 // the configured port, unlike any pod's
			})
			h := e.h()
			port := int32(3306) // opaque by default
			if mode == translator.TransportHeader {
				port = 8080
			}
			h.OnService(svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: port}), false)
			h.OnPod(proxyPod("web-1", "10.0.0.1", "[::]:4243"), false)
			h.OnPod(proxyPod("web-2", "10.0.0.2", ""), false)
			h.OnPod(proxyPod("web-3", "10.0.0.3", "4243"), false) // no address: not readable
			h.OnEndpointSlice(sliceObj("shop", "web", "web-a", port,
				epSpec{"10.0.0.1", "web-1", true, ""}, epSpec{"10.0.0.2", "web-2", true, ""}, epSpec{"10.0.0.3", "web-3", true, ""}), false)
			waitService(t, e.replica, "shop", "web")
			s, _ := get(t, e, fmt.Sprintf("web.shop.svc.cluster.local:%d", port))
			want := map[string]uint32{"10.0.0.1": 4243, "10.0.0.2": 4150, "10.0.0.3": 4150}
			got := map[string]uint32{}
			testutil.Eventually(t, 10*time.Second, "the three endpoints", func() bool {
				for a, p := range transportPorts(t, s.next(t)) {
					got[a] = p
				}
				return len(got) == 3
			})
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("opaque-transport ports %v, want %v", got, want)
			}
			// The pod IP's profile serves the same endpoint.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ps, err := e.client.GetProfile(ctx, &pb.GetDestination{Path: fmt.Sprintf("10.0.0.1:%d", port)})
			if err != nil {
				t.Fatal(err)
			}
			if p, err := ps.Recv(); err != nil || p.GetEndpoint().GetProtocolHint().GetOpaqueTransport().GetInboundPort() != 4243 {
				t.Fatalf("profile of web-1's IP: %v, %v; want opaque_transport 4243", p, err)
			}
			// The proxy moves: the new port is sent.
			h.OnPod(proxyPod("web-1", "10.0.0.1", "0.0.0.0:4343"), false)
			testutil.Eventually(t, 10*time.Second, "web-1's new port", func() bool {
				return transportPorts(t, s.next(t))["10.0.0.1"] == 4343
			})
		})
	}
}
