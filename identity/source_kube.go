package identity

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Names of Linkerd's issuer Secret and trust-roots ConfigMap.
const (
	IssuerSecretName    = "linkerd-identity-issuer"
	TrustRootsConfigMap = "linkerd-identity-trust-roots"
	trustRootsConfigKey = FileTrustAnchors
)

// KubeSource reads the issuer from the Secret linkerd-identity-issuer (crt.pem/key.pem, or
// tls.crt/tls.key for kubernetes.io/tls) and the anchors from the ConfigMap
// linkerd-identity-trust-roots (ca-bundle.crt) in Namespace. It watches both objects, and
// the reload loop also polls it.
type KubeSource struct {
	Client    kubernetes.Interface
	Namespace string
	Secret    string // default IssuerSecretName
	ConfigMap string // default TrustRootsConfigMap
}

var (
	_ IssuerSource  = (*KubeSource)(nil)
	_ ChangeWatcher = (*KubeSource)(nil)
)

func (k *KubeSource) names() (string, string) {
	s, c := k.Secret, k.ConfigMap
	if s == "" {
		s = IssuerSecretName
	}
	if c == "" {
		c = TrustRootsConfigMap
	}
	return s, c
}

func (k *KubeSource) String() string {
	s, c := k.names()
	return fmt.Sprintf("Secret %s/%s and ConfigMap %s/%s", k.Namespace, s, k.Namespace, c)
}

// Load implements IssuerSource.
func (k *KubeSource) Load(ctx context.Context) (Material, error) {
	var m Material
	sName, cName := k.names()
	sec, err := k.Client.CoreV1().Secrets(k.Namespace).Get(ctx, sName, metav1.GetOptions{})
	if err != nil {
		return m, fmt.Errorf("get issuer Secret %s/%s: %w", k.Namespace, sName, err)
	}
	crt, key := sec.Data[FileIssuerCert], sec.Data[FileIssuerKey]
	if len(crt) == 0 {
		crt, key = sec.Data[FileIssuerCertTLS], sec.Data[FileIssuerKeyTLS]
	}
	if len(crt) == 0 || len(key) == 0 {
		return m, fmt.Errorf("issuer Secret %s/%s has neither %s/%s nor %s/%s", k.Namespace, sName,
			FileIssuerCert, FileIssuerKey, FileIssuerCertTLS, FileIssuerKeyTLS)
	}
	cm, err := k.Client.CoreV1().ConfigMaps(k.Namespace).Get(ctx, cName, metav1.GetOptions{})
	if err != nil {
		return m, fmt.Errorf("get trust roots ConfigMap %s/%s: %w", k.Namespace, cName, err)
	}
	anchors := cm.Data[trustRootsConfigKey]
	if anchors == "" {
		return m, fmt.Errorf("trust roots ConfigMap %s/%s has no %s", k.Namespace, cName, trustRootsConfigKey)
	}
	m.CertPEM, m.KeyPEM, m.AnchorsPEM = crt, key, []byte(anchors)
	return m, nil
}

// Watch implements ChangeWatcher with API watches on the Secret and the ConfigMap. It
// returns when either watch ends (the API server closes watches now and then); the caller
// restarts it, and polling covers the gap.
func (k *KubeSource) Watch(ctx context.Context, changed func()) error {
	sName, cName := k.names()
	sw, err := k.Client.CoreV1().Secrets(k.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", sName).String(),
	})
	if err != nil {
		return fmt.Errorf("watch issuer Secret %s/%s: %w", k.Namespace, sName, err)
	}
	defer sw.Stop()
	cw, err := k.Client.CoreV1().ConfigMaps(k.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", cName).String(),
	})
	if err != nil {
		return fmt.Errorf("watch trust roots ConfigMap %s/%s: %w", k.Namespace, cName, err)
	}
	defer cw.Stop()
	// Whatever happened while the watches were being set up is covered by one reload.
	changed()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case ev, ok = <-sw.ResultChan():
		case ev, ok = <-cw.ResultChan():
		}
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("issuer watch closed by the API server")
		}
		if ev.Type == watch.Error {
			return fmt.Errorf("issuer watch: %v", ev.Object)
		}
		changed()
	}
}
