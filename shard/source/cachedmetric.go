package source

import (
	"github.com/prometheus/client_golang/prometheus"
)

// cachedDesc describes destination_source_cached_objects: what the informers that read a
// share (share.go) hold, by resource and form. An operator reads from it that a replica caches
// its share of the cluster only: "full" objects of the services it owns, and of the others a
// Service's cluster IPs ("reduced").
var cachedDesc = prometheus.NewDesc("destination_source_cached_objects",
	"Objects the Kubernetes source's share informers cache, by resource (services, endpointslices) and form: full (a service the replica owns), reduced (a Service's cluster IPs only, or the placeholder of a slice about to leave).",
	[]string{"resource", "form"}, nil)

// listsDesc describes destination_source_lists_total: the list requests (pages included) the
// share informers' reflectors made, their first and every relist (after a watch they could
// not resume), and those the ServiceProfile fetcher made to read many profiles at once
// (resource serviceprofiles; failed ones too). Gain's lists are not counted.
var listsDesc = prometheus.NewDesc("destination_source_lists_total",
	"List requests (pages included) the Kubernetes source's share informers made: the first, and each relist after a watch they could not resume; and for serviceprofiles, the lists that read many wanted profiles at once (when a replica starts or gains a share).",
	[]string{"resource"}, nil)

// readDesc describes destination_source_read_objects_total: the objects the share informers
// read off the wire, in lists (Gain's included) and watch events, decoded or not. An operator
// reads from it that the API server sends a replica of a namespace-keyed ring its share only:
// with a shard selector the server honours, about the replica's share of the slices.
var readDesc = prometheus.NewDesc("destination_source_read_objects_total",
	"Objects the Kubernetes source's share informers read from the API server (lists and watch events, decoded or not), by resource (services, endpointslices): with a shard selector the server honours (--shard-key namespace, ShardedListAndWatch), about the replica's share of the slices.",
	[]string{"resource"}, nil)

// podReadsDesc describes destination_source_pod_reads_total: the pods a replica that keeps
// only the pods it needs (podShare) read one at a time, when a slice started naming a pod it
// had dropped, by result: found, gone (deleted meanwhile), failed (retried), recent (served
// from the copy the watch dropped lately, without a request).
var podReadsDesc = prometheus.NewDesc("destination_source_pod_reads_total",
	"Pods the Kubernetes source read one at a time because a slice the replica keeps started naming a pod it had not kept, by result: found, gone (deleted meanwhile), failed (retried with a backoff), recent (the copy the watch dropped less than 30s before, without a request).",
	[]string{"result"}, nil)

// cachedCollector counts the share informers' caches at each scrape (a few thousand objects:
// Services and EndpointSlices, not Pods).
type cachedCollector struct{ k *Kubernetes }

// Describe implements prometheus.Collector.
func (c cachedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cachedDesc
	ch <- listsDesc
	ch <- readDesc
	ch <- podReadsDesc
}

// Collect implements prometheus.Collector. Before Run starts it reports nothing; without a
// filter, the ServiceProfile fetcher's lists only (when it reads profiles).
func (c cachedCollector) Collect(ch chan<- prometheus.Metric) {
	c.k.mu.Lock()
	shares, profiles := c.k.shares, c.k.profiles
	c.k.mu.Unlock()
	if ps := c.k.podFiltering(); ps != nil {
		for i, result := range [...]string{podFound: "found", podGone: "gone", podFailed: "failed", podRecent: "recent"} {
			ch <- prometheus.MustNewConstMetric(podReadsDesc, prometheus.CounterValue, float64(ps.reads[i].Load()), result)
		}
	}
	if profiles != nil {
		ch <- prometheus.MustNewConstMetric(listsDesc, prometheus.CounterValue, float64(profiles.lists.Load()), "serviceprofiles")
	}
	for _, s := range shares {
		full, reduced := 0, 0
		for _, obj := range s.informer.GetStore().List() {
			if isReduced(obj) {
				reduced++
			} else {
				full++
			}
		}
		res := "services"
		if s.lw.kind.kind == "EndpointSlice" {
			res = "endpointslices"
		}
		ch <- prometheus.MustNewConstMetric(cachedDesc, prometheus.GaugeValue, float64(full), res, "full")
		ch <- prometheus.MustNewConstMetric(cachedDesc, prometheus.GaugeValue, float64(reduced), res, "reduced")
		ch <- prometheus.MustNewConstMetric(listsDesc, prometheus.CounterValue, float64(s.lw.lists.Load()), res)
		ch <- prometheus.MustNewConstMetric(readDesc, prometheus.CounterValue, float64(s.lw.read.Load()), res)
	}
}
