package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// FileError is a problem with one file: File as given to the decoder (for a Dir, the path
// found under its directory), Line the 1-based line the problem is at (or the start of the
// document it is in; 0 when it concerns the whole file), and the reason. It prints as
// "file:line: reason", the reason at most MaxReason bytes (a library's reason may quote the
// object's fields in full: a 3,000-byte name twice).
type FileError struct {
	File string
	Line int
	Err  error
	// Warning marks a value that was ignored in an object that is used without it (a kind's
	// Decoded.Warnings), where every other problem withholds the object or the file.
	Warning bool
}

// MaxReason bounds the reason of a FileError's message (quote.MessagePrefix).
const MaxReason = 1024

func (e *FileError) Error() string {
	reason := quote.MessagePrefix(e.Err.Error(), MaxReason)
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, reason)
	}
	return fmt.Sprintf("%s: %s", e.File, reason)
}

func (e *FileError) Unwrap() error { return e.Err }

// Location returns the file and line of err when it is, or wraps, a *FileError.
func Location(err error) (file string, line int, ok bool) {
	var fe *FileError
	if !errors.As(err, &fe) {
		return "", 0, false
	}
	return fe.File, fe.Line, true
}

// FieldError is a problem at one field of an object, returned by a kind's Decode function
// (alone, or several joined with errors.Join). The decoder reports it at the line of the
// field in the document, or of the deepest part of Path that is present.
type FieldError struct {
	// Path names the field: "spec.ports[0].port". A list crossed without an index (as
	// encoding/json names fields in its type errors: "spec.ports.port") is resolved to the
	// one element that holds the rest of the path, preferring one whose value is of JSON
	// type Type.
	Path string
	// Type is the JSON type of the offending value ("string", "number", "bool", "object",
	// "array", "null"), or "" for any.
	Type string
	Err  error
	// PathInMessage says that Err's message names the field already (encoding/json's and the
	// strict decoder's do), so that Error prints Err alone instead of "path: err".
	PathInMessage bool
}

// fieldPathRE finds the field a message starts with ("spec.port: required",
// `metadata.name "X": ...`, "spec.ports[0].port ...").
var fieldPathRE = regexp.MustCompile(`^((?:spec|metadata|status)(?:\.[A-Za-z]+(?:\[\d+\])?)*)[ :]`)

// FieldOf returns an error whose message names its field first, as Kubernetes-style
// validation writes them, as a FieldError at that field, printed as it is; one that names no
// field is placed at its object.
func FieldOf(msg string) *FieldError {
	fe := &FieldError{Err: errors.New(msg), PathInMessage: true}
	if m := fieldPathRE.FindStringSubmatch(msg); m != nil {
		fe.Path = m[1]
	}
	return fe
}

// Field returns a FieldError at path with a formatted message; it prints as "path: message".
func Field(path, format string, args ...any) *FieldError {
	return &FieldError{Path: path, Err: fmt.Errorf(format, args...)}
}

func (e *FieldError) Error() string {
	if e.PathInMessage || e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

// flatten splits errors joined with errors.Join (at any depth) into their parts.
func flatten(err error, out []error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = flatten(e, out)
		}
		return out
	}
	if err != nil {
		out = append(out, err)
	}
	return out
}

// SortErrors orders errors by file and line (errors that are not *FileError keep their
// place relative to each other, after the located ones).
func SortErrors(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool {
		var a, b *FileError
		okA, okB := errors.As(errs[i], &a), errors.As(errs[j], &b)
		if !okA || !okB {
			return okA && !okB
		}
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
}
