package main

import (
	"testing"

	"github.com/meridian-mesh/meridian/injector"
	"github.com/meridian-mesh/meridian/policy/compute"
)

// TestPortListsAgree: the injector warns of a require-identity port list exactly when the
// policy controller cannot parse it (and then fails closed on it), so the two must read port
// lists alike.
func TestPortListsAgree(t *testing.T) {
	for _, s := range []string{"", "80", " 80 , 443 ", "8000-9000", "1-65535", "80,", ",,", "+80", "-80", "080",
		"0", "65536", "9-3", "80-80", "http", "80;443", "1 2", "8000 - 9000", "4294967377", "١٢٣"} {
		_, ierr := injector.ParsePortList(s)
		_, cerr := compute.ParsePortSet(s)
		if (ierr == nil) != (cerr == nil) {
			t.Errorf("%q: the injector says %v, the policy controller %v", s, ierr, cerr)
		}
	}
}
