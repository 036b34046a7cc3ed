package manifest

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
)

// keyLines renders decoded objects as "Kind ns/name@line" for comparison.
func keyLines(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Key.String()+"@"+strconv.Itoa(o.Line))
	}
	return out
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// decodeCases are TestDecode's cases.
var decodeCases = []struct {
	name    string
	data    string
	pass    bool // Decoder.PassUnknown
	objects []string
	ignored int
	errs    []string // regular expressions, one per error, in order
}{
	{
		name:    "single object",
		data:    thingA,
		objects: []string{"Thing shop/a@1"},
	},
	{
		name:    "multi-document with comments, empty documents and a separator comment",
		data:    "# leading comment\n---\n" + thingA + "--- # the widget\n" + widgetB + "---\n\n---\n" + thingYAML("x", "c", "c") + "...\n",
		objects: []string{"Thing shop/a@3", "Widget shop/b@13", "Thing x/c@20"},
	},
	{
		name:    "v1 List with items of several kinds",
		data:    "apiVersion: v1\nkind: List\nitems:\n" + manifesttest.IndentItem(thingA) + manifesttest.IndentItem(widgetB),
		objects: []string{"Thing shop/a@4", "Widget shop/b@13"},
	},
	{
		name:    "typed list items need no kind",
		data:    "apiVersion: v1\nkind: ThingList\nitems:\n- metadata: {name: a, namespace: x}\n- metadata: {name: b, namespace: x}\n",
		objects: []string{"Thing x/a@4", "Thing x/b@5"},
	},
	{
		name:    "typed list of a group's kind takes the list's version",
		data:    "apiVersion: example.com/v2\nkind: WidgetList\nitems:\n- metadata: {name: a}\n",
		objects: []string{"Widget default/a@4"},
	},
	{
		name:    "empty list",
		data:    "apiVersion: v1\nkind: List\nitems: []\n",
		objects: nil,
	},
	{
		name:    "other kinds are ignored",
		data:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n---\n" + thingA,
		objects: []string{"Thing shop/a@6"},
		ignored: 1,
	},
	{
		name:    "a known kind name in another group is another kind",
		data:    "apiVersion: other.io/v1\nkind: Thing\nmetadata: {name: x}\n",
		ignored: 1,
	},
	{
		name:    "other kinds passed through",
		data:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec: {replicas: 2}\n---\n" + thingA,
		pass:    true,
		objects: []string{"Deployment shop/web@1", "Thing shop/a@6"},
	},
	{
		name: "objects passed through need a name",
		data: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {generateName: web-}\n",
		pass: true,
		errs: []string{`^f\.yaml:3: kind Deployment: metadata\.name: is empty$`},
	},
	{
		name:    "JSON",
		data:    `{"apiVersion":"v1","kind":"Thing","metadata":{"name":"j","namespace":"n"},"spec":{"size":2}}`,
		objects: []string{"Thing n/j@1"},
	},
	{
		name:    "only comments",
		data:    "# nothing here\n\n---\n# nor here\n",
		objects: nil,
	},
	{
		name: "syntax error in the second document has its file line",
		data: thingA + "---\napiVersion: v1\nkind: Thing\nmetadata:\n  name: [broken\n  namespace: x\n",
		errs: []string{`^f\.yaml:1[45]: yaml: did not find expected ',' or ']'$`},
	},
	{
		name: "scanner error line",
		data: "apiVersion: v1\nkind: Thing\nmetadata:\n\tname: tab\n",
		errs: []string{`^f\.yaml:4: yaml: found character that cannot start any token$`},
	},
	{
		name: "mapping values error on a later line",
		data: thingA + "---\napiVersion: v1\nkind: Thing\nmetadata: name: x\n",
		errs: []string{`^f\.yaml:13: yaml: mapping values are not allowed in this context$`},
	},
	{
		name: "duplicate key",
		data: "# c\napiVersion: v1\nkind: Thing\nmetadata: {name: a}\nkind: Widget\n",
		errs: []string{`^f\.yaml:5: yaml: mapping key "kind" already defined at line 3$`},
	},
	{
		name: "empty name is reported at metadata",
		data: "apiVersion: v1\nkind: Thing\nmetadata:\n  namespace: shop\nspec: {size: 1}\n",
		errs: []string{`^f\.yaml:3: kind Thing: metadata\.name: is empty$`},
	},
	{
		name: "a decoder that returns no name is refused",
		data: "apiVersion: example.com/v1\nkind: Widget\nspec: {size: 1}\n",
		errs: []string{`^f\.yaml:1: kind Widget: metadata\.name: is empty$`},
	},
	{
		name: "field error at its line, named object",
		data: strings.Replace(thingA, "port: 80", "port: 70000", 1),
		errs: []string{`^f\.yaml:9: kind Thing shop/a: spec\.ports\[0\]\.port: "70000" is invalid`},
	},
	{
		name: "several errors of one object, each at its line",
		data: strings.Replace(strings.Replace(thingA, "port: 80", "port: 0", 1), "name: a", "name: A", 1),
		errs: []string{`^f\.yaml:4: kind Thing shop/A: metadata\.name: "A" is invalid`, `^f\.yaml:9: kind Thing shop/A: spec\.ports\[0\]\.port: "0" is invalid`},
	},
	{
		name: "unknown field at its line",
		data: strings.Replace(thingA, "    port: 80\n", "    port: 80\n    prot: TCP\n", 1),
		errs: []string{`^f\.yaml:10: kind Thing: unknown field "spec\.ports\[0\]\.prot"$`},
	},
	{
		name: "wrong type at its field",
		data: strings.Replace(thingA, "port: 80", "port: eighty", 1),
		errs: []string{`^f\.yaml:9: kind Thing: json: cannot unmarshal string into Go struct field \.spec\.ports\.port of type int32$`},
	},
	{
		name: "wrong type in the second element of a list",
		data: thingA + "  - name: b\n    port: \"x\"\n",
		errs: []string{`^f\.yaml:11: kind Thing: json: cannot unmarshal string into Go struct field`},
	},
	{
		name: "unsupported apiVersion",
		data: strings.Replace(widgetB, "example.com/v1", "example.com/v1beta1", 1),
		errs: []string{`^f\.yaml:1: kind Widget: apiVersion "example\.com/v1beta1" is not supported \(want example\.com/v1 or example\.com/v2\)$`},
	},
	{
		name: "unsupported apiVersion of a typed list",
		data: "apiVersion: v2\nkind: ThingList\nitems: []\n",
		errs: []string{`^f\.yaml:1: kind ThingList: apiVersion "v2" is not supported \(want v1\)$`},
	},
	{
		name: "List of another version",
		data: "apiVersion: v2\nkind: List\nitems: []\n",
		errs: []string{`^f\.yaml:1: kind List: apiVersion "v2" is not supported \(want v1\)$`},
	},
	{
		name: "items that are not a list",
		data: "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
		errs: []string{`^f\.yaml:3: kind List: items must be a list$`},
	},
	{
		name: "a list inside a list",
		data: "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n",
		errs: []string{`^f\.yaml:4: List items\[0\]: a list inside a list is not supported$`},
	},
	{
		name: "two mapping keys that are one JSON key",
		data: "apiVersion: v1\nkind: Thing\nmetadata: {name: x}\n0: a\n.0: b\n",
		errs: []string{`^f\.yaml:1: two mapping keys are the same JSON object key "0"$`},
	},
	{
		name: "missing kind",
		data: "apiVersion: v1\nmetadata: {name: x}\n",
		errs: []string{`^f\.yaml:1: kind is missing$`},
	},
	{
		name: "scalar document",
		data: "just text\n",
		errs: []string{`^f\.yaml:1: document is a scalar`},
	},
	{
		name: "object defined twice in a file",
		data: thingA + "---\n" + thingA,
		errs: []string{`^f\.yaml:11: Thing shop/a is already defined at line 1 of this file$`},
	},
	{
		name: "list item error names the item",
		data: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Thing\n  metadata: {name: ok}\n- apiVersion: v1\n  kind: Thing\n  metadata: {name: Bad_Name}\n",
		errs: []string{`^f\.yaml:9: List items\[1\]: kind Thing default/Bad_Name: metadata\.name: "Bad_Name" is invalid`},
	},
	{
		name:    "inline document after a separator",
		data:    "--- {apiVersion: v1, kind: Thing, metadata: {name: a}}\n",
		objects: []string{"Thing default/a@1"},
	},
	{
		name: "two documents without a separator line",
		data: "apiVersion: v1\nkind: Thing\nmetadata: {name: a}\n--- {apiVersion: v1}\n",
		errs: []string{`^f\.yaml:4: yaml: a second document starts here`},
	},
	{
		name: "infinite number",
		data: "apiVersion: v1\nkind: Thing\nmetadata: {name: a}\nspec: {size: .inf}\n",
		errs: []string{`^f\.yaml:1: number \+Inf is not allowed in a Kubernetes object$`},
	},
	{
		name: "too many errors",
		data: strings.Repeat("just text\n---\n", 30),
		errs: append(slicesRepeat(`^f\.yaml:\d+: document is a scalar`, maxErrorsPerFile), `^f\.yaml:\d+: too many errors in this file; stopped here$`),
	},
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			dec := testDecoder()
			dec.PassUnknown = tc.pass
			got := dec.Decode("f.yaml", []byte(tc.data))
			gotErrs := errStrings(got.Errors)
			if len(gotErrs) != len(tc.errs) {
				t.Fatalf("errors = %q, want %d matching %q", gotErrs, len(tc.errs), tc.errs)
			}
			for i, re := range tc.errs {
				if !regexp.MustCompile(re).MatchString(gotErrs[i]) {
					t.Errorf("error %d = %q, want match for %q", i, gotErrs[i], re)
				}
			}
			manifesttest.CheckLocated(t, got.Errors, "f.yaml", []byte(tc.data), Location)
			if len(tc.errs) > 0 {
				return
			}
			if g, w := strings.Join(keyLines(got.Objects), ", "), strings.Join(tc.objects, ", "); g != w {
				t.Errorf("objects = %s, want %s", g, w)
			}
			if len(got.Ignored) != tc.ignored {
				t.Errorf("ignored %d documents, want %d", len(got.Ignored), tc.ignored)
			}
		})
	}
}

// TestDecodeWarnings: a value a kind ignores is reported at its field's line, marked as a
// warning, and the object is returned with no error.
func TestDecodeWarnings(t *testing.T) {
	data := thingA + "---\napiVersion: v1\nkind: Thing\nmetadata: {name: b}\nspec:\n  size: -2\n"
	got := testDecoder().Decode("f.yaml", []byte(data))
	if len(got.Errors) > 0 || len(got.Objects) != 2 {
		t.Fatalf("errors %q, %d objects; want none and 2", errStrings(got.Errors), len(got.Objects))
	}
	want := "f.yaml:15: kind Thing default/b: spec.size: -2 is below 0; ignored"
	if w := errStrings(got.Warnings); len(w) != 1 || w[0] != want {
		t.Fatalf("warnings %q, want [%q]", w, want)
	}
	if fe := (*FileError)(nil); !errors.As(got.Warnings[0], &fe) || !fe.Warning {
		t.Errorf("the warning is not a *FileError marked Warning: %#v", got.Warnings[0])
	}
	if got.Objects[1].Value.(*thing).Spec.Size != 0 {
		t.Errorf("the ignored value was kept")
	}
	// A file with many: the first maxErrorsPerFile, and a line saying there are more.
	var many strings.Builder
	for i := range maxErrorsPerFile + 5 {
		fmt.Fprintf(&many, "---\napiVersion: v1\nkind: Thing\nmetadata: {name: t%d}\nspec: {size: -1}\n", i)
	}
	got = testDecoder().Decode("f.yaml", []byte(many.String()))
	if w := errStrings(got.Warnings); len(got.Objects) != maxErrorsPerFile+5 || len(w) != maxErrorsPerFile+1 ||
		!strings.HasSuffix(w[len(w)-1], "too many ignored values in this file; the others are not listed") {
		t.Errorf("%d objects, %d warnings ending %q", len(got.Objects), len(w), w[len(w)-1:])
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestDecodeHash checks that an object's hash follows its content, not its formatting.
func TestDecodeHash(t *testing.T) {
	dec := testDecoder()
	hash := func(data string) uint64 {
		t.Helper()
		got := dec.Decode("f.yaml", []byte(data))
		if len(got.Errors) > 0 || len(got.Objects) != 1 {
			t.Fatalf("decode %q: %v", data, got.Errors)
		}
		return got.Objects[0].Hash
	}
	a := hash(thingA)
	if b := hash("# a comment\n" + strings.ReplaceAll(thingA, "  namespace: shop\n", "  namespace: \"shop\"\n")); b != a {
		t.Errorf("comment and quoting changed the hash")
	}
	if c := hash(`{"apiVersion":"v1","kind":"Thing","metadata":{"namespace":"shop","name":"a"},"spec":{"ports":[{"port":80,"name":"http"}]}}`); c != a {
		t.Errorf("the same object in JSON has another hash")
	}
	if d := hash(strings.Replace(thingA, "port: 80", "port: 81", 1)); d == a {
		t.Errorf("a changed port kept the hash")
	}
	if e := hash(strings.Replace(strings.Replace(thingA, "v1", "example.com/v1", 1), "Thing", "Widget", 1)); e == a {
		t.Errorf("another kind with the same body has the same hash")
	}
}

// TestDecodePanickingKind checks that a kind decoder's panic is an error of its object.
func TestDecodePanickingKind(t *testing.T) {
	dec := NewDecoder(Kind{Kind: "Thing", Versions: []string{"v1"}, Decode: func(TypeMeta, []byte) (Decoded, error) { panic("boom") }})
	got := dec.Decode("f.yaml", []byte(thingA))
	if len(got.Errors) != 1 || !strings.Contains(got.Errors[0].Error(), "f.yaml:1: kind Thing: internal error decoding the object: boom") {
		t.Fatalf("errors = %v", got.Errors)
	}
}

func TestSplitDocuments(t *testing.T) {
	docs := SplitDocuments([]byte("\xef\xbb\xbfa: 1\n---\n# c\n--- # x\nb: 2\n---foo: 1\n"))
	var got []string
	for _, d := range docs {
		got = append(got, strconv.Itoa(d.Line)+":"+strconv.Quote(string(d.Text))+":"+strconv.FormatBool(d.Blank()))
	}
	want := []string{`1:"a: 1\n":false`, `3:"# c\n":true`, `5:"b: 2\n---foo: 1\n":false`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("documents\n got  %q\n want %q", got, want)
	}
}

func FuzzDecode(f *testing.F) {
	manifesttest.Seeds(f, filepath.Join("..", "..", "deploy", "examples"), thingA, widgetB, thingA+"---\n"+widgetB,
		"apiVersion: v1\nkind: List\nitems:\n"+manifesttest.IndentItem(thingA),
		"apiVersion: v1\nkind: ThingList\nitems:\n- metadata: {name: a}\n- {kind: Widget}\n",
		"a: b: c", "- 1\n- 2", "apiVersion: v1\nkind: Thing\nmetadata: {name: x}\nspec: {ports: [{port: 0}]}",
		"&a [*a]", "{apiVersion: v1, kind: Thing, metadata: {name: p, labels: {1: 2}}}", "--- !!binary AAAA",
		"apiVersion: v1\nkind: Thing\nmetadata: {name: a}\nspec: {size: .nan}\n", "{",
		"apiVersion: v1\nkind: Thing\nmetadata: {name: a}\nspec:\n  size: -1\n", "--- {a: 1}\n--- # c\n...\n")
	dec := testDecoder()
	pass := testDecoder()
	pass.PassUnknown = true
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := manifesttest.Lines(data)
		for _, d := range []*Decoder{dec, pass} {
			got := d.Decode("f.yaml", data)
			manifesttest.CheckLocated(t, got.Errors, "f.yaml", data, Location)
			manifesttest.CheckLocated(t, got.Warnings, "f.yaml", data, Location)
			for _, w := range got.Warnings {
				if fe := (*FileError)(nil); !errors.As(w, &fe) || !fe.Warning {
					t.Fatalf("a warning not marked as one: %v", w)
				}
			}
			if len(got.Errors) > 0 {
				continue
			}
			again := d.Decode("f.yaml", data)
			for i, o := range got.Objects {
				if o.Line < 1 || o.Line > lines || o.File != "f.yaml" {
					t.Fatalf("%s at line %d of %d", o.Key, o.Line, lines)
				}
				if _, isThing := o.Value.(*thing); !isThing && !d.PassUnknown {
					t.Fatalf("%s delivered as %T", o.Key, o.Value)
				}
				if _, isThing := o.Value.(*thing); o.Key.Name == "" || isThing && o.Key.Namespace == "" {
					t.Fatalf("object with an empty key: %v", o.Key)
				}
				if again.Objects[i].Hash != o.Hash {
					t.Fatalf("%s: the hash differs between two decodes", o.Key)
				}
			}
		}
	})
}

// TestLineBreaksAsYAMLCounts: the line breaks YAML's scanner counts besides LF (a lone CR,
// NEL, LS, PS) give an error's line, and manifesttest.Lines counts them the same way.
func TestLineBreaksAsYAMLCounts(t *testing.T) {
	for _, brk := range []string{"\r", "\u0085", "\u2028", "\u2029"} {
		data := []byte("a: 1" + brk + "b: [")
		if got := manifesttest.Lines(data); got != 2 {
			t.Errorf("Lines(%q) = %d, want 2", data, got)
		}
		res := testDecoder().Decode("f.yaml", data)
		if len(res.Errors) == 0 {
			t.Fatalf("%q decoded without an error", data)
		}
		manifesttest.CheckLocated(t, res.Errors, "f.yaml", data, Location)
	}
	// A UTF-16 file (by its byte order mark) is read as UTF-16, its breaks counted in its
	// text: FuzzDecode's seed b50cf7d43fb0cf17, "\xfe\xff ) \xff", is PS then U+20FF. A 0x0a
	// byte inside a UTF-16 character is no break (FuzzDirParse's seed bf41320c7b08ab0d).
	for _, data := range []string{"\xfe\xff ) \xff", "\xfe\xff\x00a\x00:\x00 \x001\x00\n\x00b\x00:\x00 \x00[", "\xff\xfea\x00:\x00 \x00[\x00",
		"\xfe\xff\x00[\x00a\x0a\xbb\x00b"} {
		res := testDecoder().Decode("f.yaml", []byte(data))
		if len(res.Errors) == 0 {
			t.Fatalf("%q decoded without an error", data)
		}
		manifesttest.CheckLocated(t, res.Errors, "f.yaml", []byte(data), Location)
		if _, line, _ := Location(res.Errors[0]); line != manifesttest.Lines([]byte(data)) {
			t.Errorf("%q: error %v at line %d, want the last, %d", data, res.Errors[0], line, manifesttest.Lines([]byte(data)))
		}
	}
}

// TestDecodeErrorBounded: an object's error quotes a bounded prefix of what a decoder's
// reason echoes (a kind's validation that quotes a 3,000-byte name, twice with the prefix).
func TestDecodeErrorBounded(t *testing.T) {
	name := strings.Repeat("A", 3000)
	got := testDecoder().Decode("f.yaml", []byte("apiVersion: v1\nkind: Thing\nmetadata:\n  name: "+name+"\n"))
	if len(got.Errors) != 1 {
		t.Fatalf("errors %q, want one", errStrings(got.Errors))
	}
	msg := got.Errors[0].Error()
	if len(msg) > len("f.yaml:4: ")+MaxReason+len("... (9999 bytes)") || !strings.HasSuffix(msg, " bytes)") || !strings.HasPrefix(msg, "f.yaml:4: kind Thing default/AAA") {
		t.Errorf("a %d-byte error: %.120q ... %q", len(msg), msg, msg[max(0, len(msg)-40):])
	}
}
