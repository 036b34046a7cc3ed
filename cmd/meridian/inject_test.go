package main

import (
	"strings"
	"testing"
)

// TestInjectManualWarnsOnBadAnnotations runs `meridian inject --manual` on a workload whose
// annotations do not parse: it is injected anyway, and each ignored annotation is a warning
// on stderr.
func TestInjectManualWarnsOnBadAnnotations(t *testing.T) {
	code, out, errOut := capture(t, "inject", "--manual", "--proxy-cpu-request=100m", "../../injector/testdata/inject/invalid.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "name: linkerd-proxy") || !strings.Contains(out, "cpu: 100m") {
		t.Errorf("not injected with the flag's cpu request:\n%s", out)
	}
	for _, want := range []string{
		`deployment/typos: warning: config.linkerd.io/proxy-cpu-request="garbage" on the workload is ignored: not a quantity (want e.g. 100m, 1, 64Mi); the default applies`,
		`deployment/typos: warning: config.linkerd.io/proxy-uid="-5" on the workload is ignored`,
		`deployment/typos: warning: config.linkerd.io/skip-inbound-ports="1-99999" on the workload is ignored`,
		`deployment/typos injected`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(out, "warning") {
		t.Errorf("warnings went to stdout, into the manifests:\n%s", out)
	}
}
