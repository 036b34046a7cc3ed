package manifest

import (
	"encoding/json"
	"fmt"
	"math"

	yaml "go.yaml.in/yaml/v3"
)

// nodeJSON converts a YAML node to JSON the way kubectl does: mapping keys that are numbers
// or booleans become strings; non-finite numbers are refused. Errors are YAML decoding
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

// toJSONValue makes a decoded YAML value encodable as JSON.
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
