package translator

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParsePortList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    PortList
		wantErr string
	}{
		{in: "", want: PortList{}},
		{in: "  ", want: PortList{}},
		{in: "25", want: PortList{Ranges: []PortRange{{25, 25}}}},
		{in: "25,587, 3306 ,4000-4100", want: PortList{Ranges: []PortRange{{25, 25}, {587, 587}, {3306, 3306}, {4000, 4100}}}},
		{in: "4000 - 4100", want: PortList{Ranges: []PortRange{{4000, 4100}}}},
		{in: "1-65535", want: PortList{Ranges: []PortRange{{1, 65535}}}},
		{in: "mysql,8080,http-alt", want: PortList{Ranges: []PortRange{{8080, 8080}}, Names: []string{"mysql", "http-alt"}}},
		{in: "25,", wantErr: "item 2: empty item"},
		{in: "0", wantErr: "out of range"},
		{in: "65536", wantErr: "out of range"},
		{in: "100-50", wantErr: "ends before it starts"},
		{in: "100-", wantErr: `"" is not a port number`},
		{in: "100-x", wantErr: `"x" is not a port number`},
		{in: "1-2-3", wantErr: "not a port number"},
		{in: "-5", wantErr: "neither"},
		{in: "My_Port", wantErr: "neither"},
		{in: "a--b", wantErr: "neither"},
		{in: "123abc", want: PortList{Names: []string{"123abc"}}},
		{in: "averyveryverylongname", wantErr: "at most 15"},
		// A long list or item is quoted as a short prefix with its length.
		{in: strings.Repeat("9", 100_000), wantErr: "9... (100000 bytes) is out of range"},
		{in: "80," + strings.Repeat("x", 100_000), wantErr: `xxx"... (100000 bytes) is neither`},
		{in: strings.Repeat("80,", 50_000) + "x_", wantErr: `"... (150002 bytes), item 50001`},
	} {
		got, err := ParsePortList(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || len(err.Error()) > 512 {
				t.Errorf("ParsePortList(%.80q) error %.300v, want a short one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePortList(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParsePortList(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestIsOpaque(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		name string
		pod  podOpt
		port uint32
		want bool
	}{
		{"default list", nil, 3306, true},
		{"default list, other port", nil, 8080, false},
		{"annotation overrides defaults", annotate(AnnotationOpaquePorts, "8080"), 3306, false},
		{"annotation port", annotate(AnnotationOpaquePorts, "8080"), 8080, true},
		{"annotation range", annotate(AnnotationOpaquePorts, "9000-9100"), 9050, true},
		{"annotation range end", annotate(AnnotationOpaquePorts, "9000-9100"), 9101, false},
		{"empty annotation: none", annotate(AnnotationOpaquePorts, ""), 3306, false},
		{"bad items skipped", annotate(AnnotationOpaquePorts, "x_y,,0,8080"), 8080, true},
		{"named port", func(p *corev1.Pod) {
			containerPort("db", 7000)(p)
			annotate(AnnotationOpaquePorts, "db")(p)
		}, 7000, true},
		{"named port, other number", func(p *corev1.Pod) {
			containerPort("db", 7000)(p)
			annotate(AnnotationOpaquePorts, "db")(p)
		}, 7001, false},
		{"unknown name", annotate(AnnotationOpaquePorts, "db"), 7000, false},
	} {
		var opts []podOpt
		if tc.pod != nil {
			opts = append(opts, tc.pod)
		}
		if got := IsOpaque(cfg, SlimPod(pod("ns", "p", opts...)), tc.port); got != tc.want {
			t.Errorf("%s: IsOpaque(%d) = %v, want %v", tc.name, tc.port, got, tc.want)
		}
	}
	if !IsOpaque(cfg, nil, 25) || IsOpaque(cfg, nil, 80) {
		t.Error("IsOpaque with a nil pod should use the defaults")
	}
}

func TestIsSkippedInbound(t *testing.T) {
	p := SlimPod(pod("ns", "p", annotate(AnnotationSkipInboundPorts, "22, 9000-9010,bad")))
	for port, want := range map[uint32]bool{22: true, 9000: true, 9005: true, 9010: true, 9011: false, 80: false} {
		if got := IsSkippedInbound(p, port); got != want {
			t.Errorf("IsSkippedInbound(%d) = %v, want %v", port, got, want)
		}
	}
	if IsSkippedInbound(nil, 22) || IsSkippedInbound(SlimPod(pod("ns", "q")), 22) {
		t.Error("no annotation must skip nothing")
	}
}

func TestListHasAllocatesNothing(t *testing.T) {
	p := SlimPod(pod("ns", "p", containerPort("db", 7000), annotate(AnnotationOpaquePorts, "25, 4000-4100, db")))
	cfg := DefaultConfig()
	if n := testing.AllocsPerRun(100, func() { IsOpaque(cfg, p, 7000) }); n != 0 {
		t.Errorf("IsOpaque allocates %v times per call", n)
	}
}

func TestIsOpaqueService(t *testing.T) {
	cfg := DefaultConfig()
	annotated := func(v string) *corev1.Service {
		s := service("ns", "db", sport("mysql", 3306), sport("admin", 9000))
		s.Annotations = map[string]string{AnnotationOpaquePorts: v}
		return s
	}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		port uint32
		want bool
	}{
		{"nil service: defaults", nil, 3306, true},
		{"no annotation: defaults", service("ns", "db"), 5432, true},
		{"no annotation: not default", service("ns", "db"), 80, false},
		{"annotation overrides", annotated("80"), 3306, false},
		{"annotation port", annotated("80"), 80, true},
		{"empty annotation", annotated(""), 3306, false},
		{"named service port", annotated("admin"), 9000, true},
		{"named service port, other number", annotated("admin"), 3306, false},
	} {
		if got := IsOpaqueService(cfg, tc.svc, tc.port); got != tc.want {
			t.Errorf("%s: IsOpaqueService(%d) = %v, want %v", tc.name, tc.port, got, tc.want)
		}
		if got := IsOpaqueService(cfg, SlimService(tc.svc), tc.port); got != tc.want {
			t.Errorf("%s: slim service: IsOpaqueService(%d) = %v, want %v", tc.name, tc.port, got, tc.want)
		}
	}
}
