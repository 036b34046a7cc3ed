package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cespare/xxhash/v2"
	yaml "go.yaml.in/yaml/v3"
)

// maxErrorsPerFile bounds how many problems one file reports; a file that is not YAML at
// all would otherwise produce one per document.
const maxErrorsPerFile = 20

// TypeMeta is what an object says it is.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// groupVersion splits an apiVersion: "v1" is the core group's; "" has no version.
func (t TypeMeta) groupVersion() (group, version string) {
	if g, v, ok := strings.Cut(t.APIVersion, "/"); ok {
		return g, v
	}
	return "", t.APIVersion
}

// Key names an object across files: kind, namespace and name. Kind is the kind's name
// alone, so a caller must not give a Decoder two kinds of one name in different groups.
type Key struct {
	Kind, Namespace, Name string
}

func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// Kind tells a Decoder how to decode the objects of one kind.
type Kind struct {
	// Group is the API group ("" for the core group, "discovery.k8s.io") and Kind the kind's
	// name ("Service"). A typed list of it ("ServiceList") is understood too.
	Group, Kind string
	// Versions are the accepted versions of the group ("v1"). An object of this group and
	// kind in another version is an error. Nil accepts every version and leaves the check to
	// Decode.
	Versions []string
	// Decode decodes, validates and defaults one object, given as JSON (tm is its apiVersion
	// and kind, which the JSON may lack when the object is an item of a typed list). It
	// returns the object's namespace and name (with the namespace defaulted as the caller
	// wants), and the typed value, which is never modified afterwards. On error it may still
	// return the namespace and name, to name the object in the message. Each error (several
	// joined with errors.Join) is reported on its own line of the file: a *FieldError at the
	// line of its field, anything else at the line of the object. Decode must be safe for
	// concurrent use; a panic in it is reported as an error of the object.
	Decode func(tm TypeMeta, data []byte) (Decoded, error)
}

// Decoded is what a Kind's Decode returns for one object.
type Decoded struct {
	Namespace, Name string
	Value           any
	// Warnings are values Decode ignored, the object being valid and used without them;
	// each is reported as errors are (a *FieldError at its field's line), as a *FileError
	// with Warning set among Result.Warnings, and does not withhold the object or its file.
	Warnings []error
}

// Object is one decoded object of a file.
type Object struct {
	Key        Key
	APIVersion string
	// Value is what the Kind's Decode returned; for a kind passed through (Decoder.PassUnknown),
	// the object as decoded from JSON (map[string]any). It must not be modified.
	Value any
	// Hash identifies the object's content (its apiVersion, kind and canonical JSON), so that
	// an object read again unchanged is recognised.
	Hash uint64
	File string
	Line int
}

// Ignored is a document of a kind the Decoder was not given (a Deployment, a ConfigMap).
type Ignored struct {
	TypeMeta
	Line int
}

// Result is what one file holds.
type Result struct {
	Objects []Object
	Ignored []Ignored
	// Errors are the file's problems, each a *FileError, in file order (at most
	// maxErrorsPerFile of them and a last one saying so).
	Errors []error
	// Warnings are the values ignored in Objects (Decoded.Warnings), each a *FileError with
	// Warning set, in file order (at most maxErrorsPerFile of them and a last one saying so).
	Warnings []error
}

// Decoder decodes files of Kubernetes YAML or JSON into objects of the kinds it is given. It
// is safe for concurrent use once made; do not change PassUnknown while in use.
type Decoder struct {
	kinds map[groupKind]*Kind
	// PassUnknown returns objects of kinds the Decoder was not given as Objects (whose Value
	// is the map decoded from JSON) instead of ignoring them.
	PassUnknown bool
}

type groupKind struct{ group, kind string }

// NewDecoder returns a Decoder for kinds. It panics when two kinds share a group and name or
// a kind lacks its Decode function: both are programming errors.
func NewDecoder(kinds ...Kind) *Decoder {
	d := &Decoder{kinds: make(map[groupKind]*Kind, len(kinds))}
	for i := range kinds {
		k := &kinds[i]
		gk := groupKind{k.Group, k.Kind}
		if _, dup := d.kinds[gk]; dup || k.Decode == nil || k.Kind == "" {
			panic(fmt.Sprintf("manifest: kind %q of group %q given twice, or without a name or Decode", k.Kind, k.Group))
		}
		d.kinds[gk] = k
	}
	return d
}

// Decode decodes every document of a file: multi-document YAML, JSON, Lists (kind List, and
// typed lists such as ServiceList whose items may omit their kind). file names the file in
// errors. It never panics on any input: each problem becomes a *FileError with a line, and
// the objects that are fine are returned even when others are not (callers decide whether
// a file with errors is used at all; Dir uses them until the file has had a version without
// errors, then keeps that one). An object defined twice in the file is an error of the file.
func (d *Decoder) Decode(file string, data []byte) Result {
	var out Result
	for _, doc := range SplitDocuments(data) {
		node, err := doc.Parse(file)
		if err != nil {
			out.Errors = append(out.Errors, err)
		} else if node != nil {
			dd := &docDecoder{dec: d, file: file, offset: doc.Line - 1, out: &out}
			dd.decodeTop(node)
		}
		if len(out.Errors) >= maxErrorsPerFile {
			out.Errors = append(out.Errors[:maxErrorsPerFile], &FileError{File: file, Line: doc.Line,
				Err: errors.New("too many errors in this file; stopped here")})
			break
		}
	}
	if len(out.Errors) == 0 {
		out.Errors = duplicateErrors(file, out.Objects)
	}
	return out
}

// duplicateErrors reports objects defined twice in one file.
func duplicateErrors(file string, objs []Object) []error {
	var errs []error
	seen := make(map[Key]int, len(objs))
	for _, o := range objs {
		if first, dup := seen[o.Key]; dup {
			errs = append(errs, &FileError{File: file, Line: o.Line,
				Err: fmt.Errorf("%s is already defined at line %d of this file", o.Key, first)})
			continue
		}
		seen[o.Key] = o.Line
	}
	return errs
}

// docDecoder decodes the objects of one YAML document.
type docDecoder struct {
	dec    *Decoder
	file   string
	offset int // add to a node's line to get the file's line
	out    *Result
}

func (d *docDecoder) errorf(line int, format string, args ...any) {
	d.out.Errors = append(d.out.Errors, &FileError{File: d.file, Line: line, Err: fmt.Errorf(format, args...)})
}

func (d *docDecoder) line(n *yaml.Node) int { return n.Line + d.offset }

// lookup finds the kind of tm; known is false for a kind the decoder was not given.
// unsupported, when not empty, says that the kind is known but not in this version, and
// which versions are wanted.
func (d *docDecoder) lookup(tm TypeMeta) (k *Kind, known bool, unsupported string) {
	group, version := tm.groupVersion()
	k = d.dec.kinds[groupKind{group, tm.Kind}]
	if k == nil {
		return nil, false, ""
	}
	if k.Versions == nil {
		return k, true, ""
	}
	want := make([]string, len(k.Versions))
	for i, v := range k.Versions {
		if v == version {
			return k, true, ""
		}
		want[i] = v
		if group != "" {
			want[i] = group + "/" + v
		}
	}
	return k, true, fmt.Sprintf("apiVersion %q is not supported (want %s)", tm.APIVersion, strings.Join(want, " or "))
}

// listOf returns, for a list kind, the kind and apiVersion its items are implied to have
// ("List" items say for themselves), and whether tm is a list at all.
func (d *docDecoder) listOf(tm TypeMeta) (implied TypeMeta, isList bool, err error) {
	if tm.Kind == "List" {
		if tm.APIVersion != "v1" {
			return TypeMeta{}, true, fmt.Errorf("kind List: apiVersion %q is not supported (want v1)", tm.APIVersion)
		}
		return TypeMeta{}, true, nil
	}
	item, ok := strings.CutSuffix(tm.Kind, "List")
	if !ok || item == "" {
		return TypeMeta{}, false, nil
	}
	implied = TypeMeta{APIVersion: tm.APIVersion, Kind: item}
	_, known, unsupported := d.lookup(implied)
	if !known {
		return TypeMeta{}, false, nil
	}
	if unsupported != "" {
		return TypeMeta{}, true, fmt.Errorf("kind %s: %s", tm.Kind, unsupported)
	}
	return implied, true, nil
}

func (d *docDecoder) decodeTop(node *yaml.Node) {
	data, tm, ok := d.toJSON(node)
	if !ok {
		return
	}
	implied, isList, err := d.listOf(tm)
	if err != nil {
		d.errorf(d.line(node), "%v", err)
		return
	}
	if !isList {
		d.decodeObject(node, data, tm, "")
		return
	}
	items := mappingValue(node, "items")
	if items == nil || items.Kind == yaml.ScalarNode && items.Tag == "!!null" {
		return
	}
	if items.Kind != yaml.SequenceNode {
		d.errorf(d.line(items), "kind %s: items must be a list", tm.Kind)
		return
	}
	for i, it := range items.Content {
		d.decodeItem(it, tm.Kind, i, implied)
	}
}

func (d *docDecoder) decodeItem(node *yaml.Node, listKind string, i int, implied TypeMeta) {
	where := fmt.Sprintf("%s items[%d]: ", listKind, i)
	data, tm, ok := d.toJSON(node)
	if !ok {
		return
	}
	if tm.Kind == "" && implied.Kind != "" {
		tm = implied
	}
	if tm.APIVersion == "" && implied.Kind != "" && tm.Kind == implied.Kind {
		tm.APIVersion = implied.APIVersion
	}
	if _, nested, _ := d.listOf(tm); nested {
		d.errorf(d.line(node), "%sa list inside a list is not supported", where)
		return
	}
	d.decodeObject(node, data, tm, where)
}

// toJSON converts a mapping node to JSON and reads its apiVersion and kind.
func (d *docDecoder) toJSON(node *yaml.Node) ([]byte, TypeMeta, bool) {
	var tm TypeMeta
	if node.Kind != yaml.MappingNode {
		if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
			return nil, tm, false
		}
		d.errorf(d.line(node), "document is a %s, want a Kubernetes object (a mapping with apiVersion and kind)", nodeKindName(node))
		return nil, tm, false
	}
	data, err := nodeJSON(node)
	if err != nil {
		fe := yamlError(d.file, d.offset+1, err)
		if fe.Line == d.offset+1 {
			fe.Line = d.line(node)
		}
		d.out.Errors = append(d.out.Errors, fe)
		return nil, tm, false
	}
	// apiVersion and kind must be strings; anything else is reported by the typed decode.
	_ = json.Unmarshal(data, &tm)
	return data, tm, true
}

// decodeObject decodes one object of a known kind, passes through or records as ignored one
// of another kind.
func (d *docDecoder) decodeObject(node *yaml.Node, data []byte, tm TypeMeta, where string) {
	line := d.line(node)
	if tm.Kind == "" {
		d.errorf(line, "%skind is missing", where)
		return
	}
	k, known, unsupported := d.lookup(tm)
	switch {
	case unsupported != "":
		d.errorf(line, "%skind %s: %s", where, tm.Kind, unsupported)
		return
	case !known && d.dec.PassUnknown:
		d.passThrough(node, data, tm, where)
		return
	case !known:
		d.out.Ignored = append(d.out.Ignored, Ignored{TypeMeta: tm, Line: line})
		return
	}
	got, err := callDecode(k, tm, data)
	if err == nil && got.Name == "" {
		err = &FieldError{Path: "metadata.name", Err: errors.New("is empty")}
	}
	prefix := where + "kind " + tm.Kind
	if got.Name != "" {
		prefix += " " + got.Namespace + "/" + got.Name
	}
	if err != nil {
		for _, e := range flatten(err, nil) {
			d.errorf(d.fieldLine(node, line, e), "%s: %v", prefix, e)
		}
		return
	}
	for _, w := range got.Warnings {
		switch n := len(d.out.Warnings); {
		case n < maxErrorsPerFile:
			d.out.Warnings = append(d.out.Warnings, &FileError{File: d.file, Line: d.fieldLine(node, line, w),
				Err: fmt.Errorf("%s: %w", prefix, w), Warning: true})
		case n == maxErrorsPerFile:
			d.out.Warnings = append(d.out.Warnings, &FileError{File: d.file, Line: line,
				Err: errors.New("too many ignored values in this file; the others are not listed"), Warning: true})
		}
	}
	d.add(Key{Kind: tm.Kind, Namespace: got.Namespace, Name: got.Name}, tm, got.Value, data, line)
}

// fieldLine is the line of the field a *FieldError names in the object at node (whose line
// is line), or line.
func (d *docDecoder) fieldLine(node *yaml.Node, line int, err error) int {
	var fe *FieldError
	if errors.As(err, &fe) && fe.Path != "" {
		return lineForParts(node, d.offset, strings.Split(fe.Path, "."), line, fe.Type)
	}
	return line
}

// callDecode runs a kind's Decode, turning a panic into an error of the object.
func callDecode(k *Kind, tm TypeMeta, data []byte) (got Decoded, err error) {
	defer func() {
		if r := recover(); r != nil {
			got, err = Decoded{}, fmt.Errorf("internal error decoding the object: %v", r)
		}
	}()
	return k.Decode(tm, data)
}

func (d *docDecoder) passThrough(node *yaml.Node, data []byte, tm TypeMeta, where string) {
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil { // cannot happen: data is a JSON object
		d.errorf(d.line(node), "%skind %s: %v", where, tm.Kind, err)
		return
	}
	meta, _ := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	if name == "" {
		at := lineForParts(node, d.offset, []string{"metadata", "name"}, d.line(node), "")
		d.errorf(at, "%skind %s: metadata.name: is empty", where, tm.Kind)
		return
	}
	d.add(Key{Kind: tm.Kind, Namespace: ns, Name: name}, tm, obj, data, d.line(node))
}

func (d *docDecoder) add(key Key, tm TypeMeta, value any, data []byte, line int) {
	h := xxhash.New()
	_, _ = h.WriteString(tm.APIVersion)
	_, _ = h.WriteString("\x00" + tm.Kind + "\x00")
	_, _ = h.Write(data)
	d.out.Objects = append(d.out.Objects, Object{
		Key: key, APIVersion: tm.APIVersion, Value: value, Hash: h.Sum64(), File: d.file, Line: line,
	})
}
