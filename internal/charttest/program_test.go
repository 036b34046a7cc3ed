package charttest

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestProgram: a container runs the meridian binary (its image's entrypoint, or a meridian
// command); meridian-proxy runs the built meridian-proxy, and only as the injected proxy
// (linkerd-proxy) of a pod outside the control plane, with a ProxyBinary given; anything else
// is refused, saying why.
func TestProgram(t *testing.T) {
	k := &Kubelet{cfg: Config{Binary: "/bin/meridian", ProxyBinary: "/bin/meridian-proxy"}}
	app := &corev1.Pod{}
	cp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"linkerd.io/control-plane-component": "destination"}}}
	for _, tc := range []struct {
		k         *Kubelet
		pod       *corev1.Pod
		container string
		command   []string
		want      string // the binary, or a part of the error
	}{
		{k, cp, "destination", nil, "/bin/meridian"},
		{k, cp, "destination", []string{"meridian", "destination"}, "/bin/meridian"},
		{k, app, "linkerd-init", []string{"/usr/local/bin/meridian", "proxy-init"}, "/bin/meridian"},
		{k, app, "linkerd-proxy", []string{"meridian-proxy"}, "/bin/meridian-proxy"},
		{k, app, "linkerd-proxy", []string{"/usr/local/bin/meridian-proxy"}, "/bin/meridian-proxy"},
		{k, cp, "linkerd-proxy", []string{"meridian-proxy"}, "in a control-plane pod (destination)"},
		{k, app, "web", []string{"meridian-proxy"}, "outside the injected proxy container linkerd-proxy"},
		{&Kubelet{cfg: Config{Binary: "/bin/meridian"}}, app, "linkerd-proxy", []string{"meridian-proxy"}, "no ProxyBinary given"},
		{k, app, "linkerd-proxy", []string{"sh", "-c", "meridian-proxy"}, `"sh" is not meridian`},
		{k, app, "web", []string{"not-meridian"}, `"not-meridian" is not meridian`},
	} {
		got, err := tc.k.program(tc.pod, &corev1.Container{Name: tc.container, Command: tc.command})
		if err != nil {
			got = err.Error()
		}
		if strings.HasPrefix(tc.want, "/") && err != nil || !strings.Contains(got, tc.want) {
			t.Errorf("%s %q: %q, want %q", tc.container, tc.command, got, tc.want)
		}
	}
}
