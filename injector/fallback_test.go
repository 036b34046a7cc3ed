package injector

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestResolveIgnoresInvalidOverrides: every invalid override is ignored with a warning and
// the field keeps what applies without it (the namespace's value, else the default);
// overrides that contradict each other fall back to the defaults. Resolve itself never
// fails on annotations.
func TestResolveIgnoresInvalidOverrides(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Proxy.CPURequest = "100m"
	cfg.Proxy.MemoryLimit = "250Mi"
	def, warns, err := cfg.Resolve(Meta{}, nil)
	if err != nil || len(warns) != 0 {
		t.Fatal(err, warns)
	}
	type ann = map[string]string
	cases := []struct {
		name    string
		ns, pod ann
		check   func(v Values) bool
		// want is one substring per expected warning, in order.
		want []string
	}{
		{name: "cpu request garbage", pod: ann{AnnotationProxyCPURequest: "garbage"},
			check: func(v Values) bool { return v.Resources.Requests.Cpu().String() == "100m" },
			want:  []string{`config.linkerd.io/proxy-cpu-request="garbage" on the workload is ignored: not a quantity (want e.g. 100m, 1, 64Mi); the default applies`}},
		{name: "a quantity whose exponent takes minutes to compute", pod: ann{AnnotationProxyCPURequest: ".2E2220022122"},
			check: func(v Values) bool { return v.Resources.Requests.Cpu().String() == "100m" },
			want:  []string{`proxy-cpu-request=".2E2220022122" on the workload is ignored: not a quantity (want e.g. 100m, 1, 64Mi; an exponent within ±18); the default applies`}},
		{name: "negative quantity", pod: ann{AnnotationProxyMemoryLimit: "-1Gi"},
			check: func(v Values) bool { return v.Resources.Limits.Memory().String() == "250Mi" },
			want:  []string{"negative quantity"}},
		{name: "uid -5", pod: ann{AnnotationProxyUID: "-5"},
			check: func(v Values) bool { return v.UID == 2102 },
			want:  []string{`proxy-uid="-5" on the workload is ignored: want an integer id in [0, 2147483647]; the default applies`}},
		{name: "uid 0", pod: ann{AnnotationProxyUID: "0"},
			check: func(v Values) bool { return v.UID == 2102 },
			want:  []string{`proxy-uid="0" on the workload is ignored: want a non-root user id in [1, 2147483647]: the proxy runs as non-root; the default applies`}},
		{name: "gid", pod: ann{AnnotationProxyGID: "x"}, check: func(v Values) bool { return v.GID == -1 }, want: []string{"proxy-gid"}},
		{name: "skip-inbound-ports 1-99999", pod: ann{AnnotationSkipInboundPorts: "1-99999"},
			check: func(v Values) bool { return len(v.SkipInbound) == 0 },
			want:  []string{`skip-inbound-ports="1-99999" on the workload is ignored: "1-99999": want a port in [1, 65535]; the default applies`}},
		{name: "a reversed range", pod: ann{AnnotationSkipOutboundPorts: "9-3"}, check: func(v Values) bool { return len(v.SkipOutbound) == 0 }, want: []string{"range end below its start"}},
		{name: "port out of range", pod: ann{AnnotationProxyInboundPort: "70000"}, check: func(v Values) bool { return v.InboundPort == 4143 }, want: []string{"want a port"}},
		{name: "native sidecar", pod: ann{AnnotationNativeSidecar: "maybe"}, check: func(v Values) bool { return v.NativeSidecar }, want: []string{"want true or false"}},
		{name: "log format", pod: ann{AnnotationProxyLogFormat: "xml"}, check: func(v Values) bool { return v.LogFormat == "plain" }, want: []string{"want plain, json"}},
		{name: "empty image", pod: ann{AnnotationProxyImage: ""}, check: func(v Values) bool { return v.Image == def.Image }, want: []string{"empty"}},
		{name: "pull policy", pod: ann{AnnotationProxyImagePullPolicy: "Sometimes"}, check: func(v Values) bool { return v.ImagePullPolicy == "IfNotPresent" }, want: []string{"want Always"}},
		// default-inbound-policy fails closed: deny, never the namespace's or the default.
		{name: "default inbound policy", pod: ann{AnnotationDefaultInboundPolicy: "open"}, check: func(v Values) bool { return v.DefaultInbound == "deny" },
			want: []string{`default-inbound-policy="open" on the workload is ignored: want all-unauthenticated, all-authenticated, cluster-unauthenticated, cluster-authenticated, deny, audit; deny applies`}},
		{name: "default inbound policy, not the namespace's", ns: ann{AnnotationDefaultInboundPolicy: "all-unauthenticated"}, pod: ann{AnnotationDefaultInboundPolicy: "Deny"},
			check: func(v Values) bool { return v.DefaultInbound == "deny" }, want: []string{`"Deny" on the workload is ignored`}},
		{name: "default inbound policy of the namespace", ns: ann{AnnotationDefaultInboundPolicy: "closed"},
			check: func(v Values) bool { return v.DefaultInbound == "deny" }, want: []string{`"closed" on the namespace is ignored: want all-unauthenticated`}},
		{name: "the pod's invalid value falls back to the namespace's",
			ns: ann{AnnotationProxyUID: "3000"}, pod: ann{AnnotationProxyUID: "root"},
			check: func(v Values) bool { return v.UID == 3000 },
			want:  []string{`proxy-uid="root" on the workload is ignored: want an integer id in [0, 2147483647]; the namespace's value applies`}},
		{name: "both invalid", ns: ann{AnnotationProxyUID: "x"}, pod: ann{AnnotationProxyUID: "y"},
			check: func(v Values) bool { return v.UID == 2102 },
			want:  []string{`"y" on the workload is ignored: want an integer id in [0, 2147483647]; the default applies`, `"x" on the namespace is ignored`}},
		{name: "a port that is another port's default", pod: ann{AnnotationProxyInboundPort: "4140"},
			check: func(v Values) bool { return v.InboundPort == 4143 && v.OutboundPort == 4140 },
			want:  []string{`proxy-inbound-port="4140" on the workload is ignored: the outbound port is also 4140; the default applies`}},
		{name: "two overrides on one port: the later is reset", pod: ann{AnnotationProxyInboundPort: "5000", AnnotationProxyAdminPort: "5000"},
			check: func(v Values) bool { return v.InboundPort == 5000 && v.AdminPort == 4191 },
			want:  []string{`proxy-admin-port="5000" on the workload is ignored: the inbound port is also 5000`}},
		{name: "a reset that collides again", pod: ann{AnnotationProxyInboundPort: "4190", AnnotationProxyControlPort: "4140"},
			check: func(v Values) bool {
				return v.InboundPort == 4143 && v.OutboundPort == 4140 && v.ControlPort == 4190
			},
			want: []string{`proxy-control-port="4140" on the workload is ignored: the outbound port is also 4140`, `proxy-inbound-port="4190" on the workload is ignored: the control port is also 4190`}},
		{name: "swapped ports are fine", pod: ann{AnnotationProxyInboundPort: "4140", AnnotationProxyOutboundPort: "4143"},
			check: func(v Values) bool { return v.InboundPort == 4140 && v.OutboundPort == 4143 }},
		{name: "a request above its limit: the request's override goes", pod: ann{AnnotationProxyCPURequest: "2", AnnotationProxyCPULimit: "1"},
			check: func(v Values) bool {
				return v.Resources.Requests.Cpu().String() == "100m" && v.Resources.Limits.Cpu().String() == "1"
			},
			want: []string{`proxy-cpu-request="2" on the workload is ignored: above the limit 1; the default applies`}},
		{name: "a limit below the default request", pod: ann{AnnotationProxyCPULimit: "50m"},
			check: func(v Values) bool {
				return v.Resources.Requests.Cpu().String() == "100m" && v.Resources.Limits.Cpu().IsZero()
			},
			want: []string{`proxy-cpu-limit="50m" on the workload is ignored: below the request 100m; the default applies`}},
		{name: "a request above the default limit", ns: ann{AnnotationProxyMemoryRequest: "1Gi"},
			check: func(v Values) bool {
				return v.Resources.Requests.Memory().IsZero() && v.Resources.Limits.Memory().String() == "250Mi"
			},
			want: []string{`proxy-memory-request="1Gi" on the namespace is ignored: above the limit 250Mi`}},
		{name: "a long value is quoted short", pod: ann{AnnotationProxyUID: strings.Repeat("9", 10000)},
			check: func(v Values) bool { return v.UID == 2102 },
			want:  []string{`proxy-uid="` + strings.Repeat("9", 40) + `"... (10000 bytes) on the workload`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, warns, err := cfg.Resolve(Meta{Annotations: c.ns}, c.pod)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if !c.check(v) {
				t.Errorf("values %+v", v)
			}
			got := Strings(warns)
			if len(got) != len(c.want) {
				t.Fatalf("warnings %q, want %d", got, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q lacks %q", got[i], w)
				}
				if len(got[i]) > 256 {
					t.Errorf("warning of %d bytes: %s", len(got[i]), got[i])
				}
			}
			for _, w := range warns {
				for _, o := range v.Overridden {
					if o == w.Annotation && w.At == AtNamespace {
						t.Errorf("%s is both ignored and overridden", o)
					}
				}
			}
		})
	}
}

// TestInvalidDefaultsAreAnError: defaults that cannot work (two equal ports, a request above
// its limit, an unparsable quantity, a container without a command) make Validate fail, so
// no webhook runs with them.
func TestInvalidDefaultsAreAnError(t *testing.T) {
	for name, mut := range map[string]func(*ProxyDefaults){
		"ports":    func(d *ProxyDefaults) { d.AdminPort = d.InboundPort },
		"request":  func(d *ProxyDefaults) { d.CPURequest, d.CPULimit = "2", "1" },
		"quantity": func(d *ProxyDefaults) { d.MemoryLimit = "lots" },
		"skip":     func(d *ProxyDefaults) { d.SkipInboundPorts = "0" },
		"command":  func(d *ProxyDefaults) { d.Command = nil },
		"program":  func(d *ProxyDefaults) { d.Command = []string{" ", "proxy"} },
		"init":     func(d *ProxyDefaults) { d.InitCommand = []string{} },
		// A flag gives these unchecked: uid 0 runs the proxy as root (and exempts every root
		// process's traffic from capture), and an unknown log level stops the proxy.
		"uid 0":     func(d *ProxyDefaults) { d.UID = 0 },
		"uid -1":    func(d *ProxyDefaults) { d.UID = -1 },
		"log level": func(d *ProxyDefaults) { d.LogLevel = "verbose" },
	} {
		cfg := DefaultConfig()
		mut(&cfg.Proxy)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate succeeded", name)
		}
	}
}

func FuzzResolve(f *testing.F) {
	for _, s := range []string{"garbage", "-5", "1-99999", "4140", "2", "", "100m", "true"} {
		f.Add(AnnotationProxyCPURequest, s, AnnotationProxyInboundPort, s)
	}
	f.Add(AnnotationProxyInboundPort, "4190", AnnotationProxyControlPort, "4140")
	f.Add(AnnotationProxyCPURequest, "2", AnnotationProxyCPULimit, "1")
	f.Add(AnnotationDefaultInboundPolicy, "Deny", AnnotationDefaultInboundPolicy, "all-unauthenticated")
	f.Add(AnnotationProxyUID, "1000", AnnotationDefaultInboundPolicy, " audit")
	policies := []string{"all-unauthenticated", "all-authenticated", "cluster-unauthenticated", "cluster-authenticated", "deny", "audit"}
	cfg := DefaultConfig()
	cfg.Proxy.CPURequest = "100m"
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		pod := map[string]string{k1: v1}
		ns := Meta{Annotations: map[string]string{k2: v2}}
		v, warns, err := cfg.Resolve(ns, pod)
		if err != nil {
			t.Fatalf("Resolve(%q=%q, ns %q=%q): %v", k1, v1, k2, v2, err)
		}
		ports := map[int32]bool{v.InboundPort: true, v.OutboundPort: true, v.AdminPort: true, v.ControlPort: true}
		if len(ports) != 4 {
			t.Fatalf("ports collide: %+v", v)
		}
		for name, lim := range v.Resources.Limits {
			if req, ok := v.Resources.Requests[name]; ok && req.Cmp(lim) > 0 {
				t.Fatalf("%s request %s above limit %s", name, req.String(), lim.String())
			}
		}
		for _, w := range Strings(warns) {
			if len(w) > 256 {
				t.Fatalf("a %d-byte warning", len(w))
			}
		}
		// The default inbound policy is one of Linkerd's, and a value that does not parse,
		// where it is read (the pod's, else the namespace's), fails closed.
		if !slices.Contains(policies, v.DefaultInbound) {
			t.Fatalf("default inbound policy %.60q", v.DefaultInbound)
		}
		read, found := pod[AnnotationDefaultInboundPolicy]
		if !found {
			read, found = ns.Annotations[AnnotationDefaultInboundPolicy]
		}
		if found && !slices.Contains(policies, strings.TrimSpace(read)) && v.DefaultInbound != FailClosedInboundPolicy {
			t.Fatalf("default-inbound-policy %.60q gave %q, not deny", read, v.DefaultInbound)
		}
	})
}

// TestQuantityExponentBounded: parseQuantity accepts the SI suffixes E and Ei and decimal
// exponents within ±18, as resource.ParseQuantity reads them, and refuses a larger exponent
// (which that parser would compute with for minutes) or an overlong string before parsing.
func TestQuantityExponentBounded(t *testing.T) {
	for _, c := range []struct {
		in, want string // want: the quantity, or "" for an error
	}{
		{"1E", "1E"}, {"2Ei", "2Ei"}, {"1e3", "1k"}, {"1E3", "1k"}, {"1e+3", "1k"}, {"1.5e-3", "1500u"},
		{"1e18", "1E"}, {"100m", "100m"},
		{"1e19", ""}, {"1e-19", ""}, {".2E2220022122", ""}, {"1e99999999999999999999", ""}, {"1e3x", ""},
		{strings.Repeat("1", 65), ""},
	} {
		q, err := parseQuantity(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("parseQuantity(%q) = %v, want an error", c.in, q.String())
		case c.want != "" && err != nil:
			t.Errorf("parseQuantity(%q): %v, want %s", c.in, err, c.want)
		case c.want != "" && q.Cmp(resource.MustParse(c.want)) != 0:
			t.Errorf("parseQuantity(%q) = %s, want %s", c.in, q.String(), c.want)
		}
	}
}
