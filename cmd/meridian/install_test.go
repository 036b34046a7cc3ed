package main

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// noCluster leaves install no cluster to find (on a machine with a kubeconfig too): it
// renders offline.
func noCluster(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
}

// objects splits a multi-document YAML stream into objects keyed by "Kind/name".
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("document does not parse: %v\n%s", err, doc)
		}
		if len(obj) == 0 {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		out[obj["kind"].(string)+"/"+meta["name"].(string)] = obj
	}
	return out
}

func parseCert(t *testing.T, pemText string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(pemText))
	if b == nil {
		t.Fatalf("no PEM in %.60q", pemText)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestInstallGeneratesIdentityWhenNoneGiven(t *testing.T) {
	noCluster(t)
	code, out, errOut := capture(t, "install", "--namespace", "mesh")
	if code != 0 {
		t.Fatalf("install = exit %d, stderr %s", code, errOut)
	}
	if !strings.Contains(errOut, "generated both for cluster.local") || !strings.Contains(errOut, "no cluster configured: rendered offline") {
		t.Errorf("stderr does not say the identity was generated: %q", errOut)
	}
	objs := objects(t, out)
	for _, k := range []string{
		"CustomResourceDefinition/servers.policy.linkerd.io", "Namespace/mesh", "StatefulSet/linkerd-destination",
		"Deployment/linkerd-identity", "Deployment/linkerd-proxy-injector", "Deployment/linkerd-policy",
		"MutatingWebhookConfiguration/linkerd-mesh-proxy-injector",
	} {
		if objs[k] == nil {
			t.Errorf("install output has no %s", k)
		}
	}
	if strings.Index(out, "kind: Namespace") > strings.Index(out, "kind: ServiceAccount") {
		t.Error("the Namespace comes after objects in it")
	}
	// The generated issuer chains to the generated anchors.
	anchors := parseCert(t, objs["ConfigMap/linkerd-identity-trust-roots"]["data"].(map[string]any)["ca-bundle.crt"].(string))
	crtB64 := objs["Secret/linkerd-identity-issuer"]["data"].(map[string]any)["crt.pem"].(string)
	crt, err := decodeB64(crtB64)
	if err != nil {
		t.Fatal(err)
	}
	issuer := parseCert(t, crt)
	if err := issuer.CheckSignatureFrom(anchors); err != nil {
		t.Fatalf("generated issuer is not signed by the generated anchor: %v", err)
	}
	if issuer.Subject.CommonName != "identity.mesh.cluster.local" {
		t.Errorf("issuer CN = %q", issuer.Subject.CommonName)
	}
	img := objs["Deployment/linkerd-identity"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
	if img != "ghcr.io/meridian-mesh/meridian:"+version {
		t.Errorf("image = %v, want the CLI's version %s", img, version)
	}
}

func TestInstallWithIdentityValuesAndHA(t *testing.T) {
	noCluster(t)
	dir := t.TempDir()
	vals := filepath.Join(dir, "identity.yaml")
	if code, _, errOut := capture(t, "identity", "init", "--values-out", vals, "--anchor-key-out", filepath.Join(dir, "anchor.key")); code != 0 {
		t.Fatalf("identity init = %d: %s", code, errOut)
	}
	if code, _, errOut := capture(t, "identity", "init", "--values-out", vals); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("identity init over an existing file = %d %q, want 1 and a refusal", code, errOut)
	}
	b, err := os.ReadFile(vals)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := capture(t, "install", "--ha", "--values", vals, "--set", "destination.nonOwner=redirect")
	if code != 0 {
		t.Fatalf("install = %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "generated") {
		t.Errorf("install generated an identity although one was given: %q", errOut)
	}
	objs := objects(t, out)
	sts := objs["StatefulSet/linkerd-destination"]["spec"].(map[string]any)
	if sts["replicas"] != float64(3) {
		t.Errorf("--ha destination replicas = %v, want 3", sts["replicas"])
	}
	args := sts["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any)
	if !containsArg(args, "--non-owner=redirect") {
		t.Errorf("--set destination.nonOwner=redirect not in the args %v", args)
	}
	given := map[string]any{}
	if err := yaml.Unmarshal(b, &given); err != nil {
		t.Fatal(err)
	}
	if got := objs["ConfigMap/linkerd-identity-trust-roots"]["data"].(map[string]any)["ca-bundle.crt"]; strings.TrimSpace(got.(string)) != strings.TrimSpace(given["identityTrustAnchorsPEM"].(string)) {
		t.Error("the trust roots ConfigMap does not hold the anchors of the values file")
	}
}

func TestInstallRejectsBadValues(t *testing.T) {
	noCluster(t)
	code, _, errOut := capture(t, "install", "--set", "destination.replicas=three")
	if code != 1 || !strings.Contains(errOut, "/destination/replicas': got string, want integer") {
		t.Fatalf("install with a bad value = %d %q", code, errOut)
	}
	if code, _, errOut := capture(t, "install", "extra"); code != 2 {
		t.Fatalf("install with an argument = %d %q, want 2", code, errOut)
	}
}

func TestIdentityInitPrintsValues(t *testing.T) {
	code, out, errOut := capture(t, "identity", "init", "--trust-domain", "example.org", "--issuer-scheme", "kubernetes.io/tls")
	if code != 0 {
		t.Fatalf("identity init = %d: %s", code, errOut)
	}
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("printed values do not parse: %v", err)
	}
	if v["identityTrustDomain"] != "example.org" || lookup(v, "identity", "issuer", "scheme") != "kubernetes.io/tls" {
		t.Fatalf("values = %v", v)
	}
	if key, _ := lookupString(v, "identity", "issuer", "tls", "keyPEM"); !strings.Contains(key, "PRIVATE KEY") {
		t.Fatal("no issuer key in the values")
	}
	if !strings.Contains(errOut, "trust anchor's key was not kept") {
		t.Errorf("stderr = %q", errOut)
	}
}

func containsArg(args []any, want string) bool {
	for _, a := range args {
		if a == want {
			return true
		}
	}
	return false
}

func decodeB64(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	return string(b), err
}
