package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/meridian-mesh/meridian/internal/manifest/yamltext"
)

// Document is one YAML document of a file.
type Document struct {
	// Line is the 1-based line of the file the document starts at (the line after its "---").
	Line int
	// Text is the document without its separator line. It is a slice of the file's data.
	Text []byte
}

// SplitDocuments cuts a file into YAML documents at separator lines: "---" alone on its
// line, optionally followed by spaces and a comment (the rule kubectl's reader applies; a
// line such as "--- {a: 1}" starts an inline document and is kept in it). A leading UTF-8
// byte order mark is dropped. There is always at least one document, possibly empty.
func SplitDocuments(data []byte) []Document {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var docs []Document
	start, line, docBegin := 1, 1, 0
	for pos := 0; pos <= len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		next := pos + end + 1
		if end < 0 {
			end = len(data) - pos
			next = len(data) + 1
		}
		if isSeparator(data[pos : pos+end]) {
			docs = append(docs, Document{Line: start, Text: data[docBegin:pos]})
			start, docBegin = line+1, min(next, len(data))
		}
		pos = next
		line++
	}
	return append(docs, Document{Line: start, Text: data[docBegin:]})
}

func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}

// Blank reports whether the document holds only blank lines and comments.
func (d Document) Blank() bool {
	for _, l := range bytes.Split(d.Text, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// lastLine is the line of the document's last character (its start when it is empty). A
// document that starts with a UTF-16 byte order mark is UTF-16 to the YAML decoder, which
// counts its lines in the decoded text (where a 0x0a byte is not a line break), with every
// break YAML knows; so are they counted here.
func (d Document) lastLine() int {
	if text, ok := yamltext.UTF16(d.Text); ok {
		return d.Line + yamltext.Breaks(yamltext.TrimBreaks(text))
	}
	n := bytes.Count(d.Text, []byte("\n"))
	if n > 0 && d.Text[len(d.Text)-1] == '\n' {
		n--
	}
	return d.Line + n
}

// Parse parses the document as YAML (JSON is YAML) and returns its root node, nil for a
// document without content, or a *FileError naming file and the line of the problem. It
// never panics.
func (d Document) Parse(file string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(d.Text))
	var root yaml.Node
	if err := decodeNode(dec, &root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // only comments and blank lines
		}
		fe := yamlError(file, d.Line, err)
		// At the end of a document the decoder may point one line past it.
		fe.Line = min(fe.Line, d.lastLine())
		return nil, fe
	}
	var extra yaml.Node
	if err := decodeNode(dec, &extra); !errors.Is(err, io.EOF) {
		line := d.Line
		if err == nil {
			line = d.Line - 1 + extra.Line
		}
		return nil, &FileError{File: file, Line: line,
			Err: errors.New(`yaml: a second document starts here; put "---" alone on its own line between documents`)}
	}
	node := &root
	if node.Kind == yaml.DocumentNode {
		if len(node.Content) == 0 {
			return nil, nil
		}
		node = node.Content[0]
	}
	return node, nil
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
