package injector

import (
	"testing"

	"github.com/meridian-mesh/meridian/translator"
)

// TestInjectedInboundPortIsReadByDestination: the destination reads the inbound port a pod's
// proxy listens on from the proxy container the injector writes (translator.ProxyInboundPort),
// to send it as the endpoint's opaque-transport port. Whatever the injector writes, as a native
// sidecar or as a container, with the default port or config.linkerd.io/proxy-inbound-port,
// the destination must read back the port the proxy listens on.
func TestInjectedInboundPortIsReadByDestination(t *testing.T) {
	for _, c := range []struct {
		name   string
		ann    map[string]string
		native bool
		want   uint16
	}{
		{name: "default, native sidecar", native: true, want: 4143},
		{name: "configured, native sidecar", ann: map[string]string{AnnotationProxyInboundPort: "4150"}, native: true, want: 4150},
		{name: "configured, container", ann: map[string]string{AnnotationProxyInboundPort: "4151"}, want: 4151},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Proxy.NativeSidecar = c.native
			pod := injectWebAnnotated(t, &cfg, c.ann)
			if got := translator.ProxyInboundPort(&pod.Spec); got != c.want {
				t.Errorf("the destination reads inbound port %d from the injected pod, want %d", got, c.want)
			}
		})
	}
}
