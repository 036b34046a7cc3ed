package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/policy/compute"
)

// TestErrorsQuoteAPrefix gives Convert objects with a 100,000-byte value in each field that
// an error quotes: every error names the field and stays short.
func TestErrorsQuoteAPrefix(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	for _, tc := range []struct{ field, doc string }{
		{"metadata.name", `{"apiVersion":"policy.linkerd.io/v1beta3","kind":"Server","metadata":{"name":"` + long + `","namespace":"ns"},"spec":{}}`},
		{"metadata.namespace", `{"apiVersion":"policy.linkerd.io/v1beta3","kind":"Server","metadata":{"name":"s","namespace":"` + long + `"},"spec":{}}`},
		{"version not served", `{"apiVersion":"policy.linkerd.io/` + long + `","kind":"Server","metadata":{"name":"s","namespace":"ns"}}`},
		{"spec.port", `{"apiVersion":"policy.linkerd.io/v1beta3","kind":"Server","metadata":{"name":"s","namespace":"ns"},"spec":{"podSelector":{},"port":"` + long + `"}}`},
		{"spec.proxyProtocol", `{"apiVersion":"policy.linkerd.io/v1beta3","kind":"Server","metadata":{"name":"s","namespace":"ns"},"spec":{"podSelector":{},"port":80,"proxyProtocol":"` + long + `"}}`},
		{"spec.targetRef", `{"apiVersion":"policy.linkerd.io/v1alpha1","kind":"AuthorizationPolicy","metadata":{"name":"a","namespace":"ns"},"spec":{"targetRef":{"kind":"` + long + `","name":"` + long + `"},"requiredAuthenticationRefs":[]}}`},
		{"spec.identities[0]", `{"apiVersion":"policy.linkerd.io/v1alpha1","kind":"MeshTLSAuthentication","metadata":{"name":"m","namespace":"ns"},"spec":{"identities":["` + long + `!"]}}`},
		{"spec.networks[0]", `{"apiVersion":"policy.linkerd.io/v1alpha1","kind":"NetworkAuthentication","metadata":{"name":"n","namespace":"ns"},"spec":{"networks":[{"cidr":"` + long + `"}]}}`},
	} {
		_, err := Convert(decode(t, tc.doc), "default")
		if err == nil || !strings.Contains(err.Error(), tc.field) || len(err.Error()) > maxErrorLen {
			t.Errorf("%s: %d bytes: %.400v", tc.field, len(fmt.Sprint(err)), err)
		}
	}
	if err := (&ErrIgnored{APIVersion: long, Kind: long}).Error(); len(err) > maxErrorLen {
		t.Errorf("ErrIgnored: %d bytes", len(err))
	}
	// Warnings too.
	for _, tc := range []struct{ field, doc string }{
		{"spec.accessPolicy", `{"apiVersion":"policy.linkerd.io/v1beta3","kind":"Server","metadata":{"name":"s","namespace":"ns"},"spec":{"podSelector":{},"port":80,"accessPolicy":"` + long + `"}}`},
		{AnnotationDefaultInboundPolicy, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","annotations":{"` + AnnotationDefaultInboundPolicy + `":"` + long + `"}}}`},
		{AnnotationOpaquePorts, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","annotations":{"` + AnnotationOpaquePorts + `":"` + long + `"}}}`},
	} {
		r, err := Convert(decode(t, tc.doc), "default")
		if err != nil || len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0], tc.field) || len(r.Warnings[0]) > maxErrorLen {
			t.Errorf("%s: %v; warnings %.400q", tc.field, err, r.Warnings)
		}
	}
}

// TestUnknownAccessPolicyDenies: a Server whose accessPolicy is none of Linkerd's is
// converted as Linkerd's policy controller indexes it, with no default authorization (deny),
// never dropped (which would leave its port on the wider default of a port without a Server).
func TestUnknownAccessPolicyDenies(t *testing.T) {
	for _, v := range []string{"allow", "Deny", "all-unauthenticated "} {
		doc := "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s, namespace: shop}\nspec: {podSelector: {}, port: 80, accessPolicy: '" + v + "'}"
		r, err := Convert(decode(t, doc), "")
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if srv := r.Value.(*compute.Server); srv.AccessPolicy != compute.Deny || len(r.Warnings) != 1 {
			t.Errorf("%q: access policy %v, warnings %q; want deny and one warning", v, srv.AccessPolicy, r.Warnings)
		}
	}
}
