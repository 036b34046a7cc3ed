package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sjson "sigs.k8s.io/json"
)

// The kinds a source delivers, as written in manifests.
const (
	KindService       = "Service"
	KindEndpointSlice = "EndpointSlice"
	KindPod           = "Pod"
)

// The API versions accepted for each kind (the ones client-go's informers watch).
const (
	apiVersionCore      = "v1"
	apiVersionDiscovery = "discovery.k8s.io/v1"
)

// maxErrorsPerFile bounds how many problems one file reports; a file that is not YAML at
// all would otherwise produce one per document.
const maxErrorsPerFile = 20

// FileError is a problem with one file of a Dir source: File as found under the directory,
// Line the 1-based line the problem is at (or the start of the document it is in; 0 when it
// concerns the whole file), and the reason.
type FileError struct {
	File string
	Line int
	Err  error
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// objectKey names an object across files: kind, namespace and name.
type objectKey struct {
	kind, namespace, name string
}

func (k objectKey) String() string { return k.kind + " " + k.namespace + "/" + k.name }

// object is one decoded, validated and defaulted Kubernetes object. obj is a
// *corev1.Service, *discoveryv1.EndpointSlice or *corev1.Pod and is never modified after
// decoding; hash identifies its content, so that unchanged objects are not delivered again.
type object struct {
	key  objectKey
	obj  any
	hash uint64
	line int
}

// ignoredDoc is a document of a kind the sources do not deliver (a Deployment, a ConfigMap).
type ignoredDoc struct {
	line       int
	apiVersion string
	kind       string
}

// decoded is what one file holds.
type decoded struct {
	objects []object
	ignored []ignoredDoc
	errs    []error // each a *FileError
}

// document is one YAML document of a file: its text and the 1-based line it starts at.
type document struct {
	start int
	text  []byte
}

// splitDocuments cuts a file into YAML documents at separator lines: "---" alone on its
// line, optionally followed by spaces and a comment (the rule kubectl's reader applies).
// A leading UTF-8 byte order mark is dropped.
func splitDocuments(data []byte) []document {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var docs []document
	start, line, docBegin := 1, 1, 0
	for pos := 0; pos <= len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		next := pos + end + 1
		if end < 0 {
			end = len(data) - pos
			next = len(data) + 1
		}
		l := data[pos : pos+end]
		if isSeparator(l) {
			docs = append(docs, document{start: start, text: data[docBegin:pos]})
			start, docBegin = line+1, min(next, len(data))
		}
		pos = next
		line++
	}
	return append(docs, document{start: start, text: data[docBegin:]})
}

// lastLine is the line of the document's last character (its start when it is empty).
func (d document) lastLine() int {
	n := bytes.Count(d.text, []byte("\n"))
	if n > 0 && d.text[len(d.text)-1] == '\n' {
		n--
	}
	return d.start + n
}

func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}

// decodeFile decodes every document of a file. file names the file in errors. It never
// panics on any input: each problem becomes a *FileError with a line, and documents that
// are fine are returned even when others are not (callers decide whether a file with
// errors is used at all; Dir uses none of it).
func decodeFile(file string, data []byte) decoded {
	var out decoded
	for _, doc := range splitDocuments(data) {
		decodeDocument(file, doc, &out)
		if len(out.errs) >= maxErrorsPerFile {
			out.errs = append(out.errs[:maxErrorsPerFile], &FileError{File: file, Line: doc.start,
				Err: errors.New("too many errors in this file; stopped here")})
			break
		}
	}
	if len(out.errs) == 0 {
		out.errs = duplicateErrors(file, out.objects)
	}
	return out
}

// duplicateErrors reports objects defined twice in one file.
func duplicateErrors(file string, objs []object) []error {
	var errs []error
	seen := make(map[objectKey]int, len(objs))
	for _, o := range objs {
		if first, dup := seen[o.key]; dup {
			errs = append(errs, &FileError{File: file, Line: o.line,
				Err: fmt.Errorf("%s is already defined at line %d of this file", o.key, first)})
			continue
		}
		seen[o.key] = o.line
	}
	return errs
}

func decodeDocument(file string, doc document, out *decoded) {
	dec := yaml.NewDecoder(bytes.NewReader(doc.text))
	var root yaml.Node
	if err := decodeNode(dec, &root); err != nil {
		if errors.Is(err, io.EOF) {
			return // only comments and blank lines
		}
		fe := yamlError(file, doc.start, err)
		// At the end of a document the decoder may point one line past it.
		fe.Line = min(fe.Line, doc.lastLine())
		out.errs = append(out.errs, fe)
		return
	}
	var extra yaml.Node
	if err := decodeNode(dec, &extra); !errors.Is(err, io.EOF) {
		line := doc.start
		if err == nil {
			line = doc.start - 1 + extra.Line
		}
		out.errs = append(out.errs, &FileError{File: file, Line: line,
			Err: errors.New(`yaml: a second document starts here; put "---" alone on its own line between documents`)})
		return
	}
	node := &root
	if node.Kind == yaml.DocumentNode {
		if len(node.Content) == 0 {
			return
		}
		node = node.Content[0]
	}
	d := &docDecoder{file: file, offset: doc.start - 1, out: out}
	d.decodeTop(node)
}

// decodeNode runs the YAML decoder, turning its panics (it has had some on hostile input)
// into errors so that a bad file can never take the process down.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

// parserProblems are the YAML parser's (not scanner's) messages. The decoder reports the
// line of a parser problem 0-based and of a scanner problem 1-based.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
	"did not find expected <stream-start>",
	"did not find expected key",
	"did not find expected node content",
	"found duplicate %TAG directive",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found undefined tag handle",
}

var (
	syntaxLineRE  = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)
	lineRE        = regexp.MustCompile(`line (\d+)`)
	leadingLineRE = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
)

// yamlError locates a YAML decoding error in the file. Lines in the decoder's messages are
// relative to the document, which starts at line start of the file.
func yamlError(file string, start int, err error) *FileError {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return typeError(file, start-1, te.Errors)
	}
	msg := err.Error()
	m := syntaxLineRE.FindStringSubmatch(msg)
	if m == nil {
		return &FileError{File: file, Line: start, Err: errors.New(msg)}
	}
	n, _ := strconv.Atoi(m[1])
	reason := m[2]
	line := start - 1 + n
	for _, p := range parserProblems {
		if reason == p {
			line = start + n
			break
		}
	}
	return &FileError{File: file, Line: line, Err: errors.New("yaml: " + reason)}
}

// typeError turns the decoder's per-node messages ("line 3: mapping key "a" already
// defined at line 1") into one error at the first line, with every line made absolute.
func typeError(file string, offset int, msgs []string) *FileError {
	line := 0
	parts := make([]string, 0, len(msgs))
	for i, m := range msgs {
		abs := lineRE.ReplaceAllStringFunc(m, func(s string) string {
			n, err := strconv.Atoi(s[len("line "):])
			if err != nil {
				return s
			}
			return "line " + strconv.Itoa(n+offset)
		})
		if i == 0 {
			if sm := leadingLineRE.FindStringSubmatch(abs); sm != nil {
				line, _ = strconv.Atoi(sm[1])
				abs = sm[2]
			}
		}
		parts = append(parts, abs)
	}
	if line == 0 {
		line = offset + 1
	}
	return &FileError{File: file, Line: line, Err: errors.New("yaml: " + strings.Join(parts, "; "))}
}

// docDecoder decodes the objects of one YAML document.
type docDecoder struct {
	file   string
	offset int // add to a node's line to get the file's line
	out    *decoded
}

func (d *docDecoder) errorf(line int, format string, args ...any) {
	d.out.errs = append(d.out.errs, &FileError{File: d.file, Line: line, Err: fmt.Errorf(format, args...)})
}

func (d *docDecoder) line(n *yaml.Node) int { return n.Line + d.offset }

// typeMeta is the part of every object that says what it is.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// listKinds are the list kinds accepted, with the kind and API version of their items
// ("List" items say for themselves).
var listKinds = map[string]typeMeta{
	"List":              {APIVersion: apiVersionCore},
	"ServiceList":       {APIVersion: apiVersionCore, Kind: KindService},
	"PodList":           {APIVersion: apiVersionCore, Kind: KindPod},
	"EndpointSliceList": {APIVersion: apiVersionDiscovery, Kind: KindEndpointSlice},
}

func (d *docDecoder) decodeTop(node *yaml.Node) {
	data, tm, ok := d.toJSON(node)
	if !ok {
		return
	}
	if item, isList := listKinds[tm.Kind]; isList {
		if tm.APIVersion != item.APIVersion {
			d.errorf(d.line(node), "kind %s: apiVersion %q is not supported (want %s)", tm.Kind, tm.APIVersion, item.APIVersion)
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
			d.decodeItem(it, tm.Kind, i, item)
		}
		return
	}
	d.decodeObject(node, data, tm, "")
}

func (d *docDecoder) decodeItem(node *yaml.Node, listKind string, i int, implied typeMeta) {
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
	if _, nested := listKinds[tm.Kind]; nested {
		d.errorf(d.line(node), "%sa list inside a list is not supported", where)
		return
	}
	d.decodeObject(node, data, tm, where)
}

// toJSON converts a mapping node to JSON and reads its apiVersion and kind.
func (d *docDecoder) toJSON(node *yaml.Node) ([]byte, typeMeta, bool) {
	var tm typeMeta
	if node.Kind != yaml.MappingNode {
		if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
			return nil, tm, false
		}
		d.errorf(d.line(node), "document is a %s, want a Kubernetes object (a mapping with apiVersion and kind)", nodeKindName(node))
		return nil, tm, false
	}
	v, err := decodeValue(node)
	if err != nil {
		fe := yamlError(d.file, d.offset+1, err)
		if fe.Line == d.offset+1 {
			fe.Line = d.line(node)
		}
		d.out.errs = append(d.out.errs, fe)
		return nil, tm, false
	}
	j, err := toJSONValue(v)
	if err != nil {
		d.errorf(d.line(node), "%v", err)
		return nil, tm, false
	}
	data, err := json.Marshal(j)
	if err != nil {
		d.errorf(d.line(node), "convert to JSON: %v", err)
		return nil, tm, false
	}
	// apiVersion and kind must be strings; anything else is reported by the typed decode.
	_ = json.Unmarshal(data, &tm)
	return data, tm, true
}

func decodeValue(node *yaml.Node) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	err = node.Decode(&v)
	return v, err
}

// toJSONValue makes a decoded YAML value encodable as JSON the way kubectl does: mapping
// keys that are numbers or booleans become strings; non-finite numbers are refused.
func toJSONValue(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			c, err := toJSONValue(e)
			if err != nil {
				return nil, err
			}
			t[k] = c
		}
		return t, nil
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			var ks string
			switch kt := k.(type) {
			case string:
				ks = kt
			case int, int64, uint64, bool, float64:
				ks = fmt.Sprint(kt)
			default:
				return nil, fmt.Errorf("mapping key %v (%T) cannot be a JSON object key", k, k)
			}
			c, err := toJSONValue(e)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		for i, e := range t {
			c, err := toJSONValue(e)
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
		return t, nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return nil, fmt.Errorf("number %v is not allowed in a Kubernetes object", t)
		}
		return t, nil
	default:
		return v, nil
	}
}

var (
	unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)
	typeFieldRE    = regexp.MustCompile(`cannot unmarshal ([a-z]+) into Go struct field [A-Za-z0-9_]+\.([^ ]+) of type`)
)

// decodeObject decodes, defaults and validates one object of a known kind, or records it
// as ignored.
func (d *docDecoder) decodeObject(node *yaml.Node, data []byte, tm typeMeta, where string) {
	line := d.line(node)
	var obj any
	var want string
	switch tm.Kind {
	case "":
		d.errorf(line, "%skind is missing", where)
		return
	case KindService:
		obj, want = &corev1.Service{}, apiVersionCore
	case KindPod:
		obj, want = &corev1.Pod{}, apiVersionCore
	case KindEndpointSlice:
		obj, want = &discoveryv1.EndpointSlice{}, apiVersionDiscovery
	default:
		d.out.ignored = append(d.out.ignored, ignoredDoc{line: line, apiVersion: tm.APIVersion, kind: tm.Kind})
		return
	}
	if tm.APIVersion != want {
		d.errorf(line, "%skind %s: apiVersion %q is not supported (want %s)", where, tm.Kind, tm.APIVersion, want)
		return
	}
	strict, err := sjson.UnmarshalStrict(data, obj, sjson.DisallowUnknownFields, sjson.DisallowDuplicateFields)
	if err != nil {
		at := line
		if m := typeFieldRE.FindStringSubmatch(err.Error()); m != nil {
			at = d.lineForParts(node, strings.Split(m[2], "."), line, m[1])
		}
		d.errorf(at, "%skind %s: %v", where, tm.Kind, err)
		return
	}
	if len(strict) > 0 {
		for _, e := range strict {
			at := line
			if m := unknownFieldRE.FindStringSubmatch(e.Error()); m != nil {
				at = d.lineForPath(node, m[1], line)
			}
			d.errorf(at, "%skind %s: %v", where, tm.Kind, e)
		}
		return
	}
	meta := objectMeta(obj)
	if meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}
	var problems []fieldError
	switch o := obj.(type) {
	case *corev1.Service:
		o.TypeMeta = metav1.TypeMeta{}
		defaultService(o)
		problems = validateService(o)
	case *corev1.Pod:
		o.TypeMeta = metav1.TypeMeta{}
		defaultPod(o)
		problems = validatePod(o)
	case *discoveryv1.EndpointSlice:
		o.TypeMeta = metav1.TypeMeta{}
		defaultEndpointSlice(o)
		problems = validateEndpointSlice(o)
	}
	if len(problems) > 0 {
		name := meta.Name
		for _, p := range problems {
			at := d.lineForPath(node, p.path, line)
			if name == "" {
				d.errorf(at, "%skind %s: %s: %s", where, tm.Kind, p.path, p.msg)
			} else {
				d.errorf(at, "%skind %s %s/%s: %s: %s", where, tm.Kind, meta.Namespace, name, p.path, p.msg)
			}
		}
		return
	}
	canon, err := json.Marshal(obj)
	if err != nil { // cannot happen for these types; refuse rather than deliver garbage
		d.errorf(line, "%skind %s: %v", where, tm.Kind, err)
		return
	}
	d.out.objects = append(d.out.objects, object{
		key:  objectKey{kind: tm.Kind, namespace: meta.Namespace, name: meta.Name},
		obj:  obj,
		hash: xxhash.Sum64(canon),
		line: line,
	})
}

func objectMeta(obj any) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.Service:
		return &o.ObjectMeta
	case *corev1.Pod:
		return &o.ObjectMeta
	case *discoveryv1.EndpointSlice:
		return &o.ObjectMeta
	}
	panic(fmt.Sprintf("source: unexpected object type %T", obj))
}

// lineForPath finds the line of a field given as "spec.ports[0].port" under node; when the
// field is absent it gives the line of the deepest part present, and def when not even the
// first part is. Where the path crosses a list without an index (encoding/json's type
// errors name fields so), the element is found among those holding the rest of the path,
// preferring one whose value is of the JSON type jsonType ("string", "number", ...; "" for
// any).
func (d *docDecoder) lineForPath(node *yaml.Node, path string, def int) int {
	return d.lineForParts(node, strings.Split(path, "."), def, "")
}

func (d *docDecoder) lineForParts(node *yaml.Node, parts []string, def int, jsonType string) int {
	line, cur := def, node
	for pi, part := range parts {
		name, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			n, err := strconv.Atoi(part[i+1 : len(part)-1])
			if err != nil {
				return line
			}
			name, idx = part[:i], n
		}
		keyNode, val := mappingEntry(cur, name)
		if val == nil {
			return line
		}
		line, cur = d.line(keyNode), val
		if idx >= 0 {
			if cur.Kind != yaml.SequenceNode || idx >= len(cur.Content) {
				return line
			}
			cur = cur.Content[idx]
			line = d.line(cur)
			continue
		}
		if cur.Kind == yaml.SequenceNode && pi+1 < len(parts) {
			return d.lineInList(cur, parts[pi+1:], line, jsonType)
		}
	}
	return line
}

// lineInList resolves the rest of a path in the one element of a list that holds it.
func (d *docDecoder) lineInList(list *yaml.Node, rest []string, def int, jsonType string) int {
	var holders, typed []*yaml.Node
	for _, el := range list.Content {
		v := nodeAt(el, rest)
		if v == nil {
			continue
		}
		holders = append(holders, el)
		if jsonType != "" && nodeJSONType(v) == jsonType {
			typed = append(typed, el)
		}
	}
	switch {
	case len(typed) == 1:
		return d.lineForParts(typed[0], rest, d.line(typed[0]), jsonType)
	case len(holders) == 1:
		return d.lineForParts(holders[0], rest, d.line(holders[0]), jsonType)
	}
	return def
}

// nodeAt follows mapping keys (no indices; lists are searched for one holding the rest).
func nodeAt(n *yaml.Node, parts []string) *yaml.Node {
	for i, p := range parts {
		if strings.ContainsRune(p, '[') {
			return nil
		}
		n = mappingValue(n, p)
		if n == nil {
			return nil
		}
		if n.Kind == yaml.SequenceNode && i+1 < len(parts) {
			for _, el := range n.Content {
				if v := nodeAt(el, parts[i+1:]); v != nil {
					return v
				}
			}
			return nil
		}
	}
	return n
}

// nodeJSONType names the JSON type a node decodes to.
func nodeJSONType(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "object"
	case yaml.SequenceNode:
		return "array"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "number"
		case "!!bool":
			return "bool"
		case "!!null":
			return "null"
		}
		return "string"
	}
	return ""
}

// mappingEntry returns the key and value nodes of key in a mapping node.
func mappingEntry(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if m.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	_, v := mappingEntry(m, key)
	return v
}

func nodeKindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	default:
		return "non-mapping node"
	}
}
