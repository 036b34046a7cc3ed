package source

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The Kubernetes protobuf wire format, read without decoding (see pbpeek's functions): every
// object on the wire is the magic k8sMagic and a runtime.Unknown envelope (1: TypeMeta
// {1: apiVersion, 2: kind}, 2: raw, the object's own message). A list is {1: ListMeta
// {2: resourceVersion, 3: continue, 5: shardInfo {1: selector}}, 2: items}; an object's first
// field is its ObjectMeta {1: name, 3: namespace, 6: resourceVersion, 11: labels (map entries
// {1: key, 2: value})}; a watch frame is a 4-byte big-endian length and (without envelope) a
// WatchEvent {1: type, 2: object {1: raw, an envelope}}. Only these fields are read; the rest
// is skipped by its length.
var k8sMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// errShortProto is returned for a message that ends inside a field.
var errShortProto = errors.New("protobuf message is truncated or malformed")

// envelope is a runtime.Unknown: the kind of the object and its own message.
type envelope struct {
	apiVersion, kind string
	raw              []byte
}

// parseEnvelope reads the magic and the runtime.Unknown of data. raw aliases data.
func parseEnvelope(data []byte) (envelope, error) {
	if !bytes.HasPrefix(data, k8sMagic) {
		return envelope{}, errors.New("not a Kubernetes protobuf object (no k8s magic)")
	}
	var e envelope
	err := fields(data[len(k8sMagic):], func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			return fields(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 1:
					e.apiVersion = string(v)
				case 2:
					e.kind = string(v)
				}
				return nil
			})
		case 2:
			e.raw = v
		}
		return nil
	})
	if err != nil {
		return envelope{}, fmt.Errorf("runtime.Unknown: %w", err)
	}
	return e, nil
}

// fields calls f for every length-delimited field of the message b (its number and
// contents, aliasing b), and skips the others. It fails on a malformed message or when f does.
func fields(b []byte, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errShortProto
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errShortProto
			}
			if err := f(num, v); err != nil {
				return err
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return errShortProto
		}
		b = b[n:]
	}
	return nil
}

// objMeta is what is read of an object's ObjectMeta before deciding whether to decode it.
type objMeta struct {
	name, namespace, resourceVersion string
	// service is the value of the label serviceLabel (EndpointSlices), or "".
	service string
}

// serviceLabel names the Service an EndpointSlice belongs to (discoveryv1.LabelServiceName).
const serviceLabel = "kubernetes.io/service-name"

// peekMeta reads the ObjectMeta, field 1 of obj (an object's own message), without
// decoding anything else. The strings are copies.
func peekMeta(obj []byte) (objMeta, error) {
	var m objMeta
	err := fields(obj, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		return fields(v, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				m.name = string(v)
			case 3:
				m.namespace = string(v)
			case 6:
				m.resourceVersion = string(v)
			case 11:
				var key, val []byte
				if err := fields(v, func(num protowire.Number, v []byte) error {
					switch num {
					case 1:
						key = v
					case 2:
						val = v
					}
					return nil
				}); err != nil {
					return err
				}
				if string(key) == serviceLabel {
					m.service = string(val)
				}
			}
			return nil
		})
	})
	return m, err
}

// listParts is a list's metadata and its items' messages (aliasing the list).
type listParts struct {
	resourceVersion, continueToken string
	// shardSelector is the selector the API server echoed in shardInfo; sharded reports
	// whether it echoed shardInfo at all.
	shardSelector string
	sharded       bool
	items         [][]byte
}

// parseList splits a list message (an EndpointSliceList or ServiceList) into its parts.
func parseList(b []byte) (listParts, error) {
	var l listParts
	err := fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			return fields(v, func(num protowire.Number, v []byte) error {
				switch num {
				case 2:
					l.resourceVersion = string(v)
				case 3:
					l.continueToken = string(v)
				case 5:
					l.sharded = true
					return fields(v, func(num protowire.Number, v []byte) error {
						if num == 1 {
							l.shardSelector = string(v)
						}
						return nil
					})
				}
				return nil
			})
		case 2:
			l.items = append(l.items, v)
		}
		return nil
	})
	return l, err
}

// parseWatchEvent splits a WatchEvent message into its type and its object's envelope.
func parseWatchEvent(b []byte) (typ string, obj []byte, err error) {
	err = fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			typ = string(v)
		case 2:
			return fields(v, func(num protowire.Number, v []byte) error {
				if num == 1 {
					obj = v
				}
				return nil
			})
		}
		return nil
	})
	return typ, obj, err
}

// peekSpecIPs reads a Service's spec.clusterIP and spec.clusterIPs (field 2, fields 3 and
// 18) without decoding the rest.
func peekSpecIPs(svc []byte) (ip string, ips []string, err error) {
	err = fields(svc, func(num protowire.Number, v []byte) error {
		if num != 2 {
			return nil
		}
		return fields(v, func(num protowire.Number, v []byte) error {
			switch num {
			case 3:
				ip = string(v)
			case 18:
				ips = append(ips, string(v))
			}
			return nil
		})
	})
	return ip, ips, err
}
