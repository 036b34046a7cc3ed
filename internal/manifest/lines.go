package manifest

import (
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The functions below find the line of a field in a YAML document's node tree, so that an
// error about a field of a decoded object points at the line that holds it.

// lineForParts finds the line of a field given as parts of a path ("spec", "ports[0]",
// "port") under node, offset lines down the file; when the field is absent it gives the
// line of the deepest part present, and def when not even the first part is. Where the
// path crosses a list without an index, the element is found among those holding the
// rest of the path, preferring one whose value is of the JSON type jsonType ("" for any).
func lineForParts(node *yaml.Node, offset int, parts []string, def int, jsonType string) int {
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
		line, cur = keyNode.Line+offset, val
		if idx >= 0 {
			if cur.Kind != yaml.SequenceNode || idx >= len(cur.Content) {
				return line
			}
			cur = cur.Content[idx]
			line = cur.Line + offset
			continue
		}
		if cur.Kind == yaml.SequenceNode && pi+1 < len(parts) {
			return lineInList(cur, offset, parts[pi+1:], line, jsonType)
		}
	}
	return line
}

// lineInList resolves the rest of a path in the one element of a list that holds it.
func lineInList(list *yaml.Node, offset int, rest []string, def int, jsonType string) int {
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
		return lineForParts(typed[0], offset, rest, typed[0].Line+offset, jsonType)
	case len(holders) == 1:
		return lineForParts(holders[0], offset, rest, holders[0].Line+offset, jsonType)
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
