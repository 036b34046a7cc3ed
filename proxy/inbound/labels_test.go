package inbound

import (
	"net/http"
	"testing"

	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// TestHostNotUTF8: a Host with a byte that is not UTF-8 (HTTP/1 lets 0x80-0xFF through)
// becomes a metric label; Prometheus panics on such a label value, which took the whole
// proxy down, before authorization, for any client that reached the inbound port. The
// request is answered (here refused: a plaintext client under all-authenticated), and the
// proxy serves the next one.
func TestHostNotUTF8(t *testing.T) {
	app := startScriptedApp(t, func(int64) (string, bool) { return okResponse, false })
	p := startProxy(t, Config{DefaultPort: app.Port(), DefaultPolicy: policy.DefaultAllAuthenticated}, Deps{})
	for _, host := range []string{"web\xff:8080", "web:8080"} {
		res := proxytest.Exchange(t, proxytest.Dial(t, p.addr), "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n", 1, http.MethodGet)
		if res[0].StatusCode != http.StatusForbidden {
			t.Errorf("Host %q: status %d, want 403 (a plaintext client under all-authenticated)", host, res[0].StatusCode)
		}
	}
}
