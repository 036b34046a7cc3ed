package main

import (
	"bytes"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// anchorsFile writes trust anchors (a real certificate) for `inject --manual` and returns its
// flag.
func anchorsFile(t *testing.T) string {
	t.Helper()
	return "--identity-trust-anchors-file=" + writeTemp(t, "ca-bundle.crt", anchorPEM(t))
}

func anchorPEM(t *testing.T) []byte {
	return testutil.NewPKI(t).AnchorPEM()
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrustAnchorsFileChecked: the trust anchors go into every injected pod's spec, so
// `inject --manual` and `injector` refuse a file that is not certificates (a usage error, exit
// 2, naming the flag): no certificate at all, a private key (the anchor's key given by
// mistake, alone or after the certificate), a certificate that does not parse.
func TestTrustAnchorsFileChecked(t *testing.T) {
	const in = "../../injector/testdata/inject/deployment.yaml"
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("secret")})
	for name, c := range map[string]struct {
		content []byte
		want    string
	}{
		"empty":         {nil, "no PEM CERTIFICATE block"},
		"a manifest":    {[]byte("apiVersion: v1\nkind: Pod\n"), "no PEM CERTIFICATE block"},
		"a key":         {key, `PEM block 1 is a "PRIVATE KEY"`},
		"cert then key": {append(anchorPEM(t), key...), `PEM block 2 is a "PRIVATE KEY"`},
		"broken cert":   {[]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), "trust anchor 1"},
	} {
		flag := "--identity-trust-anchors-file=" + writeTemp(t, "anchors", c.content)
		for _, args := range [][]string{{"inject", "--manual", flag, in}, {"injector", flag}} {
			code, out, errOut := capture(t, args...)
			if code != 2 || !strings.Contains(errOut, "--identity-trust-anchors-file") || !strings.Contains(errOut, c.want) {
				t.Errorf("%s: %s: exit %d, %q; want 2 naming the flag and %q", name, args[0], code, errOut, c.want)
			}
			if strings.Contains(out, "PRIVATE") || strings.Contains(out, "c2VjcmV0") { // "secret", as PEM writes it
				t.Errorf("%s: %s printed the key: %s", name, args[0], out)
			}
		}
	}
	if code, out, errOut := capture(t, "inject", "--manual", anchorsFile(t), in); code != 0 || !strings.Contains(out, "BEGIN CERTIFICATE") {
		t.Errorf("a certificate: exit %d, %s", code, errOut)
	}
}

// TestInjectManualWarnsOnBadAnnotations runs `meridian inject --manual` on a workload whose
// annotations do not parse: it is injected anyway, and each ignored annotation is a warning
// on stderr.
func TestInjectManualWarnsOnBadAnnotations(t *testing.T) {
	code, out, errOut := capture(t, "inject", "--manual", anchorsFile(t), "--proxy-cpu-request=100m", "../../injector/testdata/inject/invalid.yaml")
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

// TestInjectProxyCommand: the proxy runs `meridian-proxy` unless --proxy-command names
// another program (meridian,proxy for an image without it); the capture init container runs
// `meridian proxy-init` unless --proxy-init-command says otherwise; an empty element is a
// usage error.
func TestInjectProxyCommand(t *testing.T) {
	const in = "../../injector/testdata/inject/deployment.yaml"
	for _, tc := range []struct {
		flags      []string
		proxy, ini string // the command lines as the YAML lists them
	}{
		{nil, "command:\n        - meridian-proxy\n", "command:\n        - meridian\n        - proxy-init\n"},
		{[]string{"--proxy-command=meridian,proxy", "--proxy-init-command=/bin/meridian,proxy-init"},
			"command:\n        - meridian\n        - proxy\n", "command:\n        - /bin/meridian\n        - proxy-init\n"},
	} {
		args := append(append([]string{"inject", "--manual", anchorsFile(t)}, tc.flags...), in)
		code, out, errOut := capture(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.flags, code, errOut)
		}
		for _, want := range []string{tc.proxy, tc.ini} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", tc.flags, want, out)
			}
		}
	}
	for _, bad := range []string{"--proxy-command=", "--proxy-command=meridian,,proxy", "--proxy-init-command= "} {
		if code, _, errOut := capture(t, "inject", "--manual", anchorsFile(t), bad, in); code != 2 || !strings.Contains(errOut, "empty element") {
			t.Errorf("%s: exit %d, want 2 and the reason: %s", bad, code, errOut)
		}
	}
}

// TestInjectWithoutManual: without --manual the proxy flags become the pod template's
// config.linkerd.io/* annotations, for the webhook (as Linkerd's CLI writes them); an
// annotation the input carries stays. --manual without trust anchors is a usage error: the
// proxies it writes could not start.
func TestInjectWithoutManual(t *testing.T) {
	const in = "../../injector/testdata/inject/deployment.yaml"
	code, out, errOut := capture(t, "inject", "--default-inbound-policy=deny", "--skip-outbound-ports=443", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"linkerd.io/inject: enabled", "config.linkerd.io/default-inbound-policy: deny", `config.linkerd.io/skip-outbound-ports: "443"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code, _, errOut := capture(t, "inject", "--manual", in); code != 2 || !strings.Contains(errOut, "--identity-trust-anchors-file") {
		t.Errorf("--manual without anchors: exit %d, %q; want 2 naming --identity-trust-anchors-file", code, errOut)
	}
}

// TestInjectDirectory: `meridian inject DIR` reads the directory's manifest files as the
// directory sources do (subdirectories too, names starting with "." and other extensions
// skipped), in order; a directory holding a broken link, or no manifest at all, is refused
// with nothing written.
func TestInjectDirectory(t *testing.T) {
	dir := t.TempDir()
	deploy, err := os.ReadFile("../../injector/testdata/inject/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"a.yaml":         string(deploy),
		"sub/b.yml":      "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lone\nspec:\n  containers:\n  - name: app\n    image: app\n",
		".hidden/c.yaml": "kind: [",
		"notes.txt":      "kind: [",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := capture(t, "inject", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "linkerd.io/inject: enabled"); n != 2 {
		t.Errorf("%d pod templates annotated, want 2 (the Deployment and the Pod):\n%s", n, out)
	}
	if i, j := strings.Index(out, "name: web"), strings.Index(out, "name: lone"); i < 0 || j < i {
		t.Errorf("want a.yaml's Deployment, then sub/b.yml's Pod:\n%s", out)
	}
	for _, want := range []string{"a.yaml: deployment/web injected", "b.yml: pod/lone injected"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}

	if err := os.Symlink(filepath.Join(dir, "gone.yaml"), filepath.Join(dir, "z.yaml")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := capture(t, "inject", dir); code == 0 || out != "" || !strings.Contains(errOut, "z.yaml") {
		t.Errorf("with a broken link: exit %d, stdout %q, stderr %q; want a failure naming z.yaml, nothing written", code, out, errOut)
	}
	if code, _, errOut := capture(t, "inject", t.TempDir()); code == 0 || !strings.Contains(errOut, "no manifest files") {
		t.Errorf("an empty directory: exit %d, %q; want a failure saying it holds no manifest files", code, errOut)
	}
	// The loader's size cap holds for inject too (a file was read whole, however large).
	big := writeTemp(t, "big.yaml", append(deploy, bytes.Repeat([]byte("# padding\n"), 17<<20/10)...))
	if code, out, errOut := capture(t, "inject", big); code == 0 || out != "" || !strings.Contains(errOut, "over 16 MiB") {
		t.Errorf("a 17 MiB file: exit %d, %d bytes out, stderr %q; want it refused", code, len(out), errOut)
	}
}

// TestInjectRefusesBadProxyFlags: a flag that sets a proxy default is checked as the
// annotation it stands for would be, for inject with and without --manual and for the
// injector: a usage error naming the flag, nothing printed. Before, the value was copied
// into every pod (a pull policy the API server refuses, a log format the proxy does not
// know) or written onto every pod template as an annotation the webhook then ignored.
func TestInjectRefusesBadProxyFlags(t *testing.T) {
	const in = "../../injector/testdata/inject/deployment.yaml"
	for _, c := range []struct{ flag, want string }{
		{"--default-inbound-policy=allow", "--default-inbound-policy"},
		{"--image-pull-policy=Sometimes", "--image-pull-policy"},
		{"--proxy-log-format=xml", "--proxy-log-format"},
		{"--proxy-cpu-request=garbage", "--proxy-cpu-request"},
		{"--skip-inbound-ports=1-99999", "--skip-inbound-ports"},
		{"--proxy-uid=-5", "--proxy-uid"},
	} {
		for _, args := range [][]string{{"inject", c.flag, in}, {"inject", "--manual", anchorsFile(t), c.flag, in}, {"injector", c.flag}} {
			code, out, errOut := capture(t, args...)
			if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
				t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want 2 naming %s and nothing printed", args, code, len(out), errOut, c.want)
			}
		}
	}
	// Two flags that contradict each other, each valid alone.
	if code, _, errOut := capture(t, "inject", "--proxy-cpu-request=2", "--proxy-cpu-limit=1", in); code != 2 || !strings.Contains(errOut, "above the limit") {
		t.Errorf("a request above its limit: exit %d, %q", code, errOut)
	}
	// Valid values are taken, and an empty one means the default: it is written as no
	// annotation (the webhook would ignore an empty one with a warning), and with --manual
	// the default goes into the pod (an empty image, pull policy or log level would not do).
	if code, out, errOut := capture(t, "inject", "--default-inbound-policy=deny", "--image-pull-policy=Always", "--proxy-init-image=", "--proxy-cpu-request=", in); code != 0 ||
		!strings.Contains(out, "config.linkerd.io/default-inbound-policy: deny") || strings.Contains(out, "proxy-cpu-request") || strings.Contains(out, "proxy-init-image") {
		t.Errorf("valid flags: exit %d, stderr %q, stdout %s", code, errOut, out)
	}
	code, out, errOut := capture(t, "inject", "--manual", anchorsFile(t), "--proxy-image=", "--image-pull-policy=", "--proxy-log-level=", "--default-inbound-policy=", in)
	if code != 0 {
		t.Fatalf("empty flags with --manual: exit %d, %s", code, errOut)
	}
	for _, want := range []string{"image: ghcr.io/meridian-mesh/meridian:", "imagePullPolicy: IfNotPresent", "value: all-unauthenticated", "value: warn,linkerd=info"} {
		if !strings.Contains(out, want) {
			t.Errorf("empty flags with --manual: the pod lacks the default %q", want)
		}
	}
}

// TestInjectPrintsNothingOnError: inject prints nothing until every input is injected, so
// that `inject ... | kubectl apply -f -` does not apply the documents before a bad one.
func TestInjectPrintsNothingOnError(t *testing.T) {
	const good = "../../injector/testdata/inject/deployment.yaml"
	badDoc := []byte("---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad\n")
	deploy, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := writeTemp(t, "bad.yaml", badDoc)
	both := writeTemp(t, "both.yaml", append(append(deploy, '\n'), badDoc...)) // the Deployment, then the bad document
	for _, args := range [][]string{{"inject", good, bad}, {"inject", both}} {
		if code, out, errOut := capture(t, args...); code == 0 || out != "" || !strings.Contains(errOut, filepath.Base(args[len(args)-1])+":") || !strings.Contains(errOut, "yaml:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the bad document's parse error and nothing on stdout", args, code, out, errOut)
		}
	}
}

// TestInjectManualFailsClosed: in --manual mode a default-inbound-policy that does not parse
// gives the proxy deny, the pod carries deny (which the policy controller reads), and stderr
// says so; the flag's wider value does not apply.
func TestInjectManualFailsClosed(t *testing.T) {
	pod := writeTemp(t, "pod.yaml", []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: shop\n"+
		"  annotations: {config.linkerd.io/default-inbound-policy: Deny}\nspec:\n  containers: [{name: app, image: nginx}]\n"))
	code, out, errOut := capture(t, "inject", "--manual", anchorsFile(t), "--default-inbound-policy=all-unauthenticated", pod)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "config.linkerd.io/default-inbound-policy: deny") ||
		!regexp.MustCompile(`name: LINKERD2_PROXY_INBOUND_DEFAULT_POLICY\n\s+value: deny\n`).MatchString(out) {
		t.Errorf("output lacks the pod's deny or the proxy's:\n%s", out)
	}
	if !strings.Contains(errOut, `default-inbound-policy="Deny" on the workload is ignored`) || !strings.Contains(errOut, "; deny applies") {
		t.Errorf("stderr %q, want the warning", errOut)
	}
}
