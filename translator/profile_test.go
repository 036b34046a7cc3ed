package translator

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// spHead is the start of every profile of validateCases.
const spHead = `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata:
  name: name.ns.svc.cluster.local
  namespace: linkerd-ns
spec:
`

// validateCases are linkerd2's TestValidate cases (pkg/profiles/profiles_test.go, the
// sp-validator's checks), inputs and messages; err "" is valid. Where Linkerd's message
// comes from its YAML library, the case asks for the part that names the problem.
var validateCases = []struct {
	sp, err string
}{
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1", ""},
	{spHead + `  retryBudget:
    minRetriesPerSecond: 5
    retryRatio: 0.2
    ttl: 10ms
  routes:
  - name: name-1
    condition:
      method: GET
      pathRegex: /route-1
      any:
      - all:
        - method: POST
        - pathRegex: '/authors/\d+'
      - all:
        - not:
            method: DELETE
        - pathRegex: /info.txt
    responseClasses:
    - condition:
        status:
          min: 500
          max: 599
        all:
        - status:
            min: 500
            max: 599
        - not:
            status:
              min: 503`, ""},
	{strings.Replace(spHead, "name.ns.svc.cluster.local", "^.^", 1) + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1",
		`ServiceProfile "^.^" has invalid name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	{spHead + "  foo: bar\n  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1", `unknown field "foo"`},
	{spHead + "  routes:\n  - name: name-1\n    foo: bar\n    condition:\n      method: GET\n      pathRegex: /route-1", `unknown field "foo"`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      foo: bar\n      method: GET\n      pathRegex: /route-1", `unknown field "foo"`},
	{spHead + "  routes:\n  - name: name-1", `ServiceProfile "name.ns.svc.cluster.local" has a route with no condition`},
	{spHead + "  routes:\n  - condition:\n      method: GET\n      pathRegex: /route-1", `ServiceProfile "name.ns.svc.cluster.local" has a route with no name`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      foo: bar\n      method: GET\n      pathRegex: /route-1\n      not:\n        method: GET", `unknown field "foo"`},
	{spHead + "  routes:\n  - name: name-1\n    condition:", `ServiceProfile "name.ns.svc.cluster.local" has a route with no condition`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method:", `ServiceProfile "name.ns.svc.cluster.local" has a route with an invalid condition: A request match must have a field set`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:",
		`ServiceProfile "name.ns.svc.cluster.local" has a response class with no condition`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:\n        status:\n          min: 500\n          max: 599\n        all:\n        - status:",
		`ServiceProfile "name.ns.svc.cluster.local" has a response class with an invalid condition: A response match must have a field set`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:\n        status:\n          min: 500\n          max: 600",
		`ServiceProfile "name.ns.svc.cluster.local" has a response class with an invalid condition: Range maximum must be between 100 and 599, inclusive`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:\n        status:\n          min: 500\n          max: 599\n        all:\n        - status:\n            min: 500\n            max: 599\n        - not:\n            status:\n              min: 300\n              max: 200",
		`ServiceProfile "name.ns.svc.cluster.local" has a response class with an invalid condition: Range maximum cannot be smaller than minimum`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:\n        status:\n          min: 500\n          max: 599\n        all:\n        - status:\n            min: 500\n            max: 599\n        - not:\n            status:\n              min: 1",
		`ServiceProfile "name.ns.svc.cluster.local" has a response class with an invalid condition: Range minimum must be between 100 and 599, inclusive`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:\n        status:\n          min: 500\n          max: 599\n        all:\n        - status:\n            min: 500\n            max: 599\n        - not:\n            status:\n              min: false",
		`cannot unmarshal bool into Go struct field Range.spec.routes.responseClasses.condition.all.not.status.min of type uint32`},
	{spHead + "  retryBudget:\n    minRetriesPerSecond: 5\n    retryRatio: 0.2\n  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1",
		`ServiceProfile "name.ns.svc.cluster.local" RetryBudget missing TTL field`},
	{spHead + "  retryBudget:\n    minRetriesPerSecond: 5\n    retryRatio: 0.2\n    ttl: foo\n  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1",
		`ServiceProfile "name.ns.svc.cluster.local" RetryBudget: time: invalid duration "foo"`},
	{spHead + "  retryBudget:\n    minRetriesPerSecond: 5\n    retryRatio: -0.2\n    ttl: 10s\n  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1",
		`ServiceProfile "name.ns.svc.cluster.local" RetryBudget RetryRatio must be non-negative: -0.200000`},
	{spHead + "  retryBudget:\n    minRetriesPerSecond: -5\n    retryRatio: 0.2\n    ttl: 10s\n  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1",
		`cannot unmarshal number -5 into Go struct field RetryBudget.spec.retryBudget.minRetriesPerSecond of type uint32`},
	{spHead + "  routes:\n  -", `ServiceProfile "name.ns.svc.cluster.local" has a null route`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n      all:\n      -", `ServiceProfile "name.ns.svc.cluster.local" has a route with an invalid condition: null condition "all"`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n      any:\n      -", `ServiceProfile "name.ns.svc.cluster.local" has a route with an invalid condition: null condition "any"`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    -", `ServiceProfile "name.ns.svc.cluster.local" has a null response class`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:\n        status:\n          min: 500\n          max: 599\n        all:\n        -",
		`ServiceProfile "name.ns.svc.cluster.local" has a response class with an invalid condition: null condition "all"`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1\n    responseClasses:\n    - condition:\n        status:\n          min: 500\n          max: 599\n        any:\n        -",
		`ServiceProfile "name.ns.svc.cluster.local" has a response class with an invalid condition: null condition "any"`},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1,\n    timeout: 1ns", ""},
	{spHead + "  routes:\n  - name: name-1\n    condition:\n      method: GET\n      pathRegex: /route-1,\n    timeout: one-second",
		`ServiceProfile "name.ns.svc.cluster.local" has a route with an invalid timeout: time: invalid duration "one-second"`},
}

// TestValidateServiceProfile runs linkerd2's TestValidate cases: exact messages where they are
// Linkerd's own, the problem's words where they come from the decoder.
func TestValidateServiceProfile(t *testing.T) {
	for i, tc := range validateCases {
		err := ValidateServiceProfile([]byte(tc.sp))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("case %d: %v, want valid", i, err)
		case tc.err == "":
		case err == nil:
			t.Errorf("case %d: valid, want %q", i, tc.err)
		case strings.HasPrefix(tc.err, "ServiceProfile ") && err.Error() != tc.err:
			t.Errorf("case %d:\n got %q\nwant %q", i, err, tc.err)
		case !strings.Contains(err.Error(), tc.err):
			t.Errorf("case %d: %q, want it to say %q", i, err, tc.err)
		}
	}
}

// A route timeout and a retry budget TTL of 100,000 bytes that are no durations.
var (
	longTimeoutSP = spHead + "  routes:\n  - name: r\n    condition: {method: GET}\n    timeout: " + strings.Repeat("9x", 50_000) + "\n"
	longTTLSP     = spHead + "  retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 5, ttl: " + strings.Repeat("9x", 50_000) + "}\n"
)

// TestValidateServiceProfileLongDuration: the error for a long value that is no duration
// names the field and quotes a short prefix (time.ParseDuration's error quotes it whole).
func TestValidateServiceProfileLongDuration(t *testing.T) {
	for want, sp := range map[string]string{"invalid timeout": longTimeoutSP, "RetryBudget": longTTLSP} {
		err := ValidateServiceProfile([]byte(sp))
		if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 2*quote.Max {
			t.Errorf("%s: %d bytes: %.300v", want, len(fmt.Sprint(err)), err)
		}
	}
}

func FuzzValidateServiceProfile(f *testing.F) {
	for _, tc := range validateCases {
		f.Add(tc.sp)
	}
	f.Add(spHead + "  routes:\n  - name: r\n    condition: " + strings.Repeat("{not: ", 100) + "{method: GET}" + strings.Repeat("}", 100))
	f.Add(spHead + "  " + strings.Repeat("x", 5000) + ": 1\n")
	f.Add(longTimeoutSP)
	f.Add(longTTLSP)
	f.Fuzz(func(t *testing.T, data string) {
		err := ValidateServiceProfile([]byte(data))
		if err == nil {
			return
		}
		// The message is short and valid UTF-8 whatever the input.
		if msg := err.Error(); len(msg) > 8*quote.Max || !utf8.ValidString(msg) {
			t.Fatalf("a %d-byte message (valid UTF-8: %v) for %d bytes of input", len(msg), utf8.ValidString(msg), len(data))
		}
	})
}

func TestProfiledService(t *testing.T) {
	for _, tc := range []struct{ name, svc, ns string }{
		{"name1.ns.svc.mycluster.local", "name1", "ns"},
		{"name1.ns.svc.cluster.local", "", ""},
		{"ns.svc.mycluster.local", "", ""},
		{"a.b.c.svc.mycluster.local", "", ""},
		{".ns.svc.mycluster.local", "", ""},
	} {
		svc, ns, ok := ProfiledService(tc.name, "mycluster.local")
		if svc != tc.svc || ns != tc.ns || ok != (tc.svc != "") {
			t.Errorf("ProfiledService(%q) = %q, %q, %v", tc.name, svc, ns, ok)
		}
	}
}
