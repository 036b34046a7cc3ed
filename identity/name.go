package identity

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// ServiceAccountIdentity returns the identity of a ServiceAccount:
// SA.NS.serviceaccount.identity.CPNS.TRUSTDOMAIN.
func ServiceAccountIdentity(namespace, serviceAccount, controlPlaneNS, trustDomain string) string {
	return serviceAccount + "." + namespace + ".serviceaccount.identity." + controlPlaneNS + "." + trustDomain
}

// ParseServiceAccountUser splits a Kubernetes username of the form
// system:serviceaccount:NS:SA, checking that NS and SA are DNS labels.
func ParseServiceAccountUser(username string) (namespace, serviceAccount string, err error) {
	parts := strings.Split(username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", "", fmt.Errorf("reviewed user %s is not of the form system:serviceaccount:NS:SA", quote.String(username))
	}
	for _, l := range parts[2:] {
		if errs := validation.IsDNS1123Label(l); len(errs) > 0 {
			return "", "", fmt.Errorf("reviewed user %s: %s is not a DNS label: %s", quote.String(username), quote.String(l), strings.Join(errs, "; "))
		}
	}
	return parts[2], parts[3], nil
}
