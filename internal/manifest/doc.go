// Package manifest is Meridian's one loader of Kubernetes YAML and JSON manifests: the
// destination's Dir source, the policy controller's directory source and `meridian inject`
// read through it.
//
// It has two layers:
//
//   - The decoder (SplitDocuments, Document.Parse, Decoder): splits multi-document files,
//     decodes YAML or JSON, expands Lists (kind List and typed lists such as ServiceList),
//     and hands each object, as JSON, to the decoder of its kind, which the caller gives
//     (a Kind: group, kind, versions and a Decode function that decodes, validates and
//     defaults into a typed value; DecodeStrict decodes as the API server does). Kinds it
//     is not given are ignored or passed through, as the caller chooses. Every problem is a
//     *FileError printing "file:line: reason"; a Decode error that is a *FieldError is
//     placed at the line of its field. A value Decode ignores in an object it accepts
//     (Decoded.Warnings) is reported the same way, marked as a warning, and withholds
//     nothing. It never panics, on any input.
//   - The directory follower (Dir): reads *.yaml, *.yml and *.json under a directory
//     (skipping names that start with "."), keeps each file's last good objects while the
//     file has problems, lets the first definition of an object win, refuses files over a
//     size cap, reports broken symbolic links and loops, and follows the directory with
//     internal/filewatch (notifications plus a periodic rescan, so a directory replaced or
//     moved away and back is read again). It delivers the full state and its difference
//     from the last delivery, and reports problems one way for every caller: warn once when
//     a problem appears and info when it clears, the gauge manifest_errors{file}, and
//     run.Warner and run.Readier (Warnings, Ready) for the process's /ready.
//
// It owns no Kubernetes types: what an object means is the caller's. It imports
// internal/filewatch, internal/metrics, internal/quote, internal/manifest/yamltext, the YAML
// and JSON decoders, xxhash, Prometheus and zap; it must not import any other Meridian
// package but internal/filewatch, internal/metrics, internal/quote, internal/manifest/yamltext
// and internal/run: `shard/...`,
// `policy/...`, `injector/...`, `translator`, `snapshot`, `identity/...`, `bench/...`,
// `cmd/...`.
package manifest
