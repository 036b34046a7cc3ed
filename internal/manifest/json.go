package manifest

import (
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"

	yaml "go.yaml.in/yaml/v3"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// nodeJSON converts a YAML node to JSON the way kubectl does: mapping keys that are numbers
// or booleans become strings (two that become the same string are refused); non-finite
// numbers are refused. Errors are YAML decoding
// errors (located by yamlError) or plain messages.
func nodeJSON(node *yaml.Node) ([]byte, error) {
	v, err := decodeValue(node)
	if err != nil {
		return nil, err
	}
	j, err := toJSONValue(v)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("convert to JSON: %w", err)
	}
	return data, nil
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

// convertEach converts every value of a map or a slice with toJSONValue, in place (set
// stores a converted value under its key).
func convertEach[K any](all iter.Seq2[K, any], set func(K, any)) error {
	for k, e := range all {
		c, err := toJSONValue(e)
		if err != nil {
			return err
		}
		set(k, c)
	}
	return nil
}

// toJSONValue makes a decoded YAML value encodable as JSON.
func toJSONValue(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if err := convertEach(maps.All(t), func(k string, c any) { t[k] = c }); err != nil {
			return nil, err
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
			if _, dup := m[ks]; dup {
				// 0 and .0, say: which one's value JSON got would follow map order.
				return nil, fmt.Errorf("two mapping keys are the same JSON object key %s", quote.String(ks))
			}
			c, err := toJSONValue(e)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		if err := convertEach(slices.All(t), func(i int, c any) { t[i] = c }); err != nil {
			return nil, err
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
