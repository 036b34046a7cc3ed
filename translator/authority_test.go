package translator

import (
	"errors"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// TestParseAuthorityQuotesAPrefix: an error quotes at most quote.Max bytes of what the client
// sent, says how long it was, and shows runes as runes.
func TestParseAuthorityQuotesAPrefix(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct {
		name, path string
		want       []string
	}{
		{"1 MB", strings.Repeat("a", 1<<20), []string{`"` + strings.Repeat("a", quote.Max) + `"... (1048576 bytes)`, "longer than a DNS name"}},
		{"1 MB with a port", strings.Repeat("a", 1<<20) + ":80", []string{"(1048579 bytes)", "host is 1048576 characters long"}},
		{"1 MB of NUL", strings.Repeat("\x00", 1<<20), []string{`"` + strings.Repeat(`\x00`, quote.Max/4) + `"... (1048576 bytes)`}},
		{"a long port", "web.shop.svc.cluster.local:" + strings.Repeat("9", 1<<20), []string{"out of range"}},
		{"a long non-numeric port", "web.shop.svc.cluster.local:" + strings.Repeat("x", 1<<20), []string{"is not a number", "(1048576 bytes)"}},
		{"too many colons", strings.Repeat("a:", 1<<19), []string{"too many ':'", "(1048576 bytes)"}},
		{"a rune", "wéb.shop.svc.cluster.local:80", []string{`service name "wéb" has "é": only letters`}},
		{"a cut rune", "w\xc3b.shop.svc.cluster.local:80", []string{`has "\xc3"`}},
		{"an upper-case rune", "WÉB.shop.svc.cluster.local", []string{`service name "wÉb" has "É"`}},
		{"the Kelvin sign", "\u212Aube.shop.svc.cluster.local", []string{"has \"\u212a\": only"}},
	} {
		_, err := ParseAuthority(cfg, c.path)
		if err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		msg := err.Error()
		if len(msg) > 3*quote.Max {
			t.Errorf("%s: a %d-byte error for a %d-byte path: %.300s", c.name, len(msg), len(c.path), msg)
		}
		if strings.Contains(msg, "Ã") {
			t.Errorf("%s: %s shows a byte as a rune", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %.400q lacks %q", c.name, msg, w)
			}
		}
	}
}

func TestParseAuthority(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		path    string
		want    Target
		wantErr string // substring of the error; "" for success
		ip      bool
	}{
		{path: "web.shop.svc.cluster.local", want: Target{Service: "web", Namespace: "shop", Port: 80}},
		{path: "web.shop.svc.cluster.local:8080", want: Target{Service: "web", Namespace: "shop", Port: 8080}},
		{path: "web.shop.svc.cluster.local.:1", want: Target{Service: "web", Namespace: "shop", Port: 1}},
		{path: "Web.Shop.SVC.Cluster.Local:65535", want: Target{Service: "web", Namespace: "shop", Port: 65535}},
		{path: "web-0.web.shop.svc.cluster.local:80", want: Target{Service: "web", Namespace: "shop", Hostname: "web-0", Port: 80}},
		{path: "", wantErr: "empty authority"},
		{path: "   ", wantErr: "empty authority"},
		{path: ":80", wantErr: "empty host"},
		{path: "web.shop.svc.cluster.local:", wantErr: "empty port"},
		{path: "web.shop.svc.cluster.local:0", wantErr: "out of range 1-65535"},
		{path: "web.shop.svc.cluster.local:65536", wantErr: "out of range 1-65535"},
		{path: "web.shop.svc.cluster.local:99999999999999999999", wantErr: "out of range 1-65535"},
		{path: "web.shop.svc.cluster.local:http", wantErr: `port "http" is not a number`},
		{path: "web.shop.svc.cluster.local:-1", wantErr: "is not a number"},
		{path: "web.shop.svc.cluster.local:+80", wantErr: "is not a number"},
		{path: "10.0.0.1", ip: true, wantErr: "is an IP address"},
		{path: "10.0.0.1:80", ip: true, wantErr: "is an IP address"},
		{path: "[fd00::1]:80", ip: true, wantErr: "is an IP address"},
		{path: "[fd00::1]", ip: true, wantErr: "is an IP address"},
		{path: "fd00::1", ip: true, wantErr: "is an IP address"},
		{path: "[web]:80", wantErr: "not an IPv6 address"},
		{path: "[fd00::1:80", wantErr: "missing ']'"},
		{path: "a:b:c", wantErr: "too many ':'"},
		{path: "web.shop.svc.example.org", wantErr: `not in the cluster domain "cluster.local"`},
		{path: "web.shop.svc", wantErr: `not in the cluster domain "cluster.local"`},
		{path: "web.shop", wantErr: "is not a Service name"},
		{path: "example.com:443", wantErr: "is not a Service name"},
		{path: "shop.svc.cluster.local", wantErr: "has 1 name(s) before .svc.cluster.local"},
		{path: "a.b.c.d.svc.cluster.local", wantErr: "has 4 name(s)"},
		{path: ".shop.svc.cluster.local", wantErr: "empty service name"},
		{path: "web..svc.cluster.local", wantErr: "empty namespace"},
		{path: "web_1.shop.svc.cluster.local", wantErr: `service name "web_1" has "_"`},
		{path: "-web.shop.svc.cluster.local", wantErr: "must start and end with a letter or digit"},
		{path: "web.shop-.svc.cluster.local", wantErr: "must start and end"},
		{path: "x_y.web.shop.svc.cluster.local", wantErr: `hostname "x_y"`},
		{path: strings.Repeat("a", 64) + ".shop.svc.cluster.local", wantErr: "longer than 63 characters"},
		{path: strings.Repeat("a.", 130) + "svc.cluster.local", wantErr: "longer than a DNS name"},
	}
	for _, tc := range tests {
		got, err := ParseAuthority(cfg, tc.path)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("ParseAuthority(%q): unexpected error %v", tc.path, err)
			} else if got != tc.want {
				t.Errorf("ParseAuthority(%q) = %+v, want %+v", tc.path, got, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseAuthority(%q) = %+v, want error containing %q", tc.path, got, tc.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseAuthority(%q) error %q, want it to contain %q", tc.path, err, tc.wantErr)
		}
		if errors.Is(err, ErrIPAddress) != tc.ip {
			t.Errorf("ParseAuthority(%q): errors.Is(err, ErrIPAddress) = %v, want %v", tc.path, !tc.ip, tc.ip)
		}
		// The error names the authority: all of it, or its first quote.Max bytes.
		if named := tc.path[:min(len(tc.path), quote.Max)]; tc.path != "" && !strings.Contains(err.Error(), named) && strings.TrimSpace(tc.path) != "" {
			t.Errorf("ParseAuthority(%q) error %q does not name the authority", tc.path, err)
		}
	}
}

func TestParseAuthorityOtherDomain(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ClusterDomain = "corp.example"
	got, err := ParseAuthority(cfg, "web.shop.svc.corp.example.:9000")
	if err != nil || got != (Target{Service: "web", Namespace: "shop", Port: 9000}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := ParseAuthority(cfg, "web.shop.svc.cluster.local"); err == nil || !strings.Contains(err.Error(), `"corp.example"`) {
		t.Fatalf("wrong domain: err %v", err)
	}
}

func TestParseContextToken(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ContextToken
	}{
		{"", ContextToken{}},
		{`{"ns":"shop","nodeName":"node-1","pod":"web-0"}`, ContextToken{Namespace: "shop", NodeName: "node-1", Pod: "web-0"}},
		{`{"ns":"shop"}`, ContextToken{Namespace: "shop"}},
		{`{"ns":"shop","extra":1}`, ContextToken{Namespace: "shop"}},
		{`null`, ContextToken{}},
		{"ns:shop", ContextToken{Namespace: "shop"}},
		{"ns:", ContextToken{}},
		{"ns:a:b", ContextToken{}},
		{"pod:web", ContextToken{}},
		{`{"ns":1}`, ContextToken{}},
		{`{"ns":"shop"`, ContextToken{}},
		{"garbage", ContextToken{}},
		{`"ns:shop"`, ContextToken{}},
		// linkerd2's TestTokenStructure (controller/api/destination/server_test.go): valid
		// JSON (with a trailing newline), the old ns:<namespace> form, and neither.
		{"{\"ns\":\"ns-1\",\"nodeName\":\"node-1\"}\n", ContextToken{Namespace: "ns-1", NodeName: "node-1"}},
		{"ns:ns-2", ContextToken{Namespace: "ns-2"}},
		{"123fa-test", ContextToken{}},
	} {
		if got := ParseContextToken(tc.in); got != tc.want {
			t.Errorf("ParseContextToken(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
