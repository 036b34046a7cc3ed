package check

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/tlsid"
)

// The chart's names for the identity and webhook material.
const (
	issuerSecret     = "linkerd-identity-issuer"
	trustRootsCM     = "linkerd-identity-trust-roots"
	webhookSecret    = "linkerd-proxy-injector-k8s-tls"
	webhookService   = "linkerd-proxy-injector"
	certManagerCAAnn = "cert-manager.io/inject-ca-from"
)

// webhookConfigName is the MutatingWebhookConfiguration of the control plane in ns.
func webhookConfigName(ns string) string { return "linkerd-" + ns + "-proxy-injector" }

// expiry says whether c is valid from now for at least min, and if not, how it fails.
func expiry(what string, c *x509.Certificate, now time.Time, min time.Duration) string {
	switch left := c.NotAfter.Sub(now); {
	case now.Before(c.NotBefore):
		return fmt.Sprintf("%s is not valid before %s", what, c.NotBefore.UTC().Format(time.RFC3339))
	case left <= 0:
		return fmt.Sprintf("%s expired on %s", what, c.NotAfter.UTC().Format(time.RFC3339))
	case left < min:
		return fmt.Sprintf("%s expires in %d days (%s), sooner than %d days", what, int(left.Hours()/24), c.NotAfter.UTC().Format(time.RFC3339), int(min.Hours()/24))
	}
	return ""
}

func checkIdentity(ctx context.Context, s *state) (Result, bool) {
	ns := s.cfg.Namespace
	hint := fmt.Sprintf("issue a new issuer from the trust anchor (or new anchors and issuer with meridian identity init --values-out values-identity.yaml, then helm upgrade -f values-identity.yaml and restart the meshed pods), or renew it in cert-manager; identity reloads the Secret %s/%s by itself", ns, issuerSecret)
	cm, err := s.deps.Kube.CoreV1().ConfigMaps(ns).Get(ctx, trustRootsCM, metav1.GetOptions{})
	if err != nil {
		return fail("trust roots: "+err.Error(), hint), false
	}
	anchors, err := tlsid.ParseCertificates([]byte(cm.Data["ca-bundle.crt"]), "trust anchor")
	if err != nil {
		return fail(fmt.Sprintf("ConfigMap %s ca-bundle.crt: %v", trustRootsCM, err), hint), false
	}
	sec, err := s.deps.Kube.CoreV1().Secrets(ns).Get(ctx, issuerSecret, metav1.GetOptions{})
	if err != nil {
		return fail("issuer: "+err.Error(), hint), false
	}
	crtPEM, keyPEM := sec.Data["crt.pem"], sec.Data["key.pem"]
	if len(crtPEM) == 0 {
		crtPEM, keyPEM = sec.Data["tls.crt"], sec.Data["tls.key"]
	}
	chain, err := tlsid.ParseCertificates(crtPEM, "certificate")
	if err != nil {
		return fail(fmt.Sprintf("Secret %s: %v", issuerSecret, err), hint), false
	}
	var problems []string
	if _, err := tls.X509KeyPair(crtPEM, keyPEM); err != nil {
		problems = append(problems, "the issuer's key does not match its certificate: "+err.Error())
	}
	issuer := chain[0]
	if !issuer.IsCA {
		problems = append(problems, "the issuer certificate is not a CA")
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, a := range anchors {
		roots.AddCert(a)
		if p := expiry("trust anchor "+a.Subject.CommonName, a, s.now, s.cfg.MinValidity); p != "" {
			problems = append(problems, p)
		}
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := issuer.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: s.now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		problems = append(problems, "the issuer does not chain to the trust anchors: "+err.Error())
	}
	if p := expiry("issuer "+issuer.Subject.CommonName, issuer, s.now, s.cfg.MinValidity); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return fail(problems[0], hint, problems[1:]...), false
	}
	return ok(fmt.Sprintf("issuer %s valid until %s, %d trust anchor(s)", issuer.Subject.CommonName, issuer.NotAfter.UTC().Format(time.DateOnly), len(anchors)))
}

func checkWebhook(ctx context.Context, s *state) (Result, bool) {
	ns := s.cfg.Namespace
	name := webhookConfigName(ns)
	hint := "helm upgrade renews the chart's certificate and its caBundle together (or cert-manager does, with proxyInjector.certManager.enabled); until then the API server cannot call the injector and pods start without a proxy (or are refused with failurePolicy Fail)"
	mwc, err := s.deps.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fail("MutatingWebhookConfiguration: "+err.Error(), hint), false
	}
	if len(mwc.Webhooks) == 0 {
		return fail("MutatingWebhookConfiguration "+name+" has no webhook", hint), false
	}
	sec, err := s.deps.Kube.CoreV1().Secrets(ns).Get(ctx, webhookSecret, metav1.GetOptions{})
	if err != nil {
		return fail("the webhook's certificate: "+err.Error(), hint), false
	}
	certs, err := tlsid.ParseCertificates(sec.Data["tls.crt"], "certificate")
	if err != nil {
		return fail(fmt.Sprintf("Secret %s tls.crt: %v", webhookSecret, err), hint), false
	}
	if _, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"]); err != nil {
		return fail("the webhook's key does not match its certificate: "+err.Error(), hint), false
	}
	leaf, inter := certs[0], x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	dns := webhookService + "." + ns + ".svc"
	var problems []string
	for _, wh := range mwc.Webhooks {
		bundle := wh.ClientConfig.CABundle
		if len(bundle) == 0 {
			msg := "webhook " + wh.Name + " has an empty caBundle"
			if a := mwc.Annotations[certManagerCAAnn]; a != "" {
				msg += " (cert-manager's cainjector should fill it from " + a + ")"
			}
			problems = append(problems, msg)
			continue
		}
		cas, err := tlsid.ParseCertificates(bundle, "CA certificate")
		if err != nil {
			problems = append(problems, "webhook "+wh.Name+" caBundle: "+err.Error())
			continue
		}
		roots := x509.NewCertPool()
		for _, c := range cas {
			roots.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: dns, CurrentTime: s.now}); err != nil {
			problems = append(problems, fmt.Sprintf("the certificate in Secret %s does not verify against the caBundle of webhook %s as %s: %v", webhookSecret, wh.Name, dns, err))
		}
	}
	if p := expiry("the webhook's certificate", leaf, s.now, s.cfg.MinValidity); p != "" {
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return fail(problems[0], hint, problems[1:]...), false
	}
	return ok(fmt.Sprintf("%s valid until %s", dns, leaf.NotAfter.UTC().Format(time.DateOnly)))
}
