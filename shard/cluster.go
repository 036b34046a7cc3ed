package shard

import (
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/translator"
)

// clusterState holds what every replica keeps of the whole cluster besides Services and pods: the
// zone of each Node (name and zone only) and the projection of each policy.linkerd.io
// Server. Both are small: a Server is a selector, a port and a protocol. Servers are kept
// for every namespace rather than only those of the services the replica owns because a pod
// IP's profile (GetProfile by IP) is answered by the owner of the address in the ring, from
// the pod and its namespace's Servers, and the pods whose addresses a replica owns are
// spread over every namespace that has a few pods: keeping only the namespaces of the pods
// it holds would save nearly nothing, at the cost of a list per namespace it starts holding
// a pod in. Nodes are kept whole for the same reason: a client on any node may ask. Safe
// for concurrent use.
type clusterState struct {
	log *zap.Logger

	mu      sync.RWMutex
	zones   map[string]string                        // node name -> zone
	servers map[string]map[string]*translator.Server // namespace -> name -> Server
	lists   map[string][]*translator.Server          // namespace -> its Servers, by name; immutable

	// nsWatchers are woken when a namespace's Servers change.
	nsWatchers notifier[string]
}

func newClusterState(log *zap.Logger) *clusterState {
	return &clusterState{log: log, zones: map[string]string{}, servers: map[string]map[string]*translator.Server{},
		lists: map[string][]*translator.Server{}}
}

// setNode records the zone of a Node and reports whether it changed.
func (c *clusterState) setNode(n *metav1.PartialObjectMetadata, deleted bool) bool {
	zone := translator.NodeZone(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.zones[n.Name]
	if deleted {
		delete(c.zones, n.Name)
		return had && old != ""
	}
	c.zones[n.Name] = zone
	return old != zone
}

// zone returns the zone of the node named node ("" when unknown).
func (c *clusterState) zone(node string) string {
	if node == "" {
		return ""
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.zones[node]
}

// setServer records a Server (or its deletion) and reports whether its namespace's Servers
// changed. An invalid Server (Problem set) replaces no valid version of itself: the last good
// one stays in effect, as the policy controller does.
func (c *clusterState) setServer(s *translator.Server, deleted bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	byName := c.servers[s.Namespace]
	old := byName[s.Name]
	switch {
	case deleted:
		if old == nil {
			return false
		}
		delete(byName, s.Name)
		if len(byName) == 0 {
			delete(c.servers, s.Namespace)
		}
	case s.Problem != "" && old != nil && old.Problem == "":
		c.log.Warn("invalid Server update ignored; its last good version stays in effect",
			zap.String("server", s.Namespace+"/"+s.Name), zap.String("problem", s.Problem))
		return false
	default:
		if byName == nil {
			byName = map[string]*translator.Server{}
			c.servers[s.Namespace] = byName
		}
		byName[s.Name] = s
	}
	list := make([]*translator.Server, 0, len(byName))
	for _, v := range byName {
		list = append(list, v)
	}
	slices.SortFunc(list, func(a, b *translator.Server) int { return strings.Compare(a.Name, b.Name) })
	if len(list) == 0 {
		delete(c.lists, s.Namespace)
	} else {
		c.lists[s.Namespace] = list
	}
	return true
}

// serversOf returns the Servers of namespace ns, sorted by name. The slice must not be
// modified.
func (c *clusterState) serversOf(ns string) []*translator.Server {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lists[ns]
}
