package manifest

import (
	"errors"
	"regexp"

	sjson "sigs.k8s.io/json"
)

var (
	unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)
	typeFieldRE    = regexp.MustCompile(`cannot unmarshal ([a-z]+) into Go struct field [A-Za-z0-9_]*\.([^ ]+) of type`)
)

// DecodeStrict unmarshals the JSON of an object into obj as the API server does, with
// unknown and duplicate fields as errors. The errors (joined) are *FieldError values that
// locate the field they are about, with the decoder's own messages; a Kind's Decode
// returns them as they are.
func DecodeStrict(data []byte, obj any) error {
	strict, err := sjson.UnmarshalStrict(data, obj, sjson.DisallowUnknownFields, sjson.DisallowDuplicateFields)
	if err != nil {
		fe := &FieldError{Err: err, PathInMessage: true}
		if m := typeFieldRE.FindStringSubmatch(err.Error()); m != nil {
			fe.Path, fe.Type = m[2], m[1]
		}
		return fe
	}
	if len(strict) == 0 {
		return nil
	}
	errs := make([]error, 0, len(strict))
	for _, e := range strict {
		fe := &FieldError{Err: e, PathInMessage: true}
		if m := unknownFieldRE.FindStringSubmatch(e.Error()); m != nil {
			fe.Path = m[1]
		}
		errs = append(errs, fe)
	}
	return errors.Join(errs...)
}
