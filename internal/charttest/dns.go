package charttest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// clusterDNS is the stand-in for the cluster's DNS: A records for Services
// (<svc>.<ns>.svc.<domain>: the ClusterIP, or for a headless Service the IPs of the ready
// pods it selects, all of them with publishNotReadyAddresses) and for pods with a hostname and
// subdomain (<host>.<svc>.<ns>.svc.<domain>), read from the API server at each query. It
// serves UDP on port 53 (a resolv.conf names no port).
type clusterDNS struct {
	conn   net.PacketConn
	kube   kubernetes.Interface
	domain string // cluster domain, without dots around it
	wg     sync.WaitGroup
}

// startDNS serves on addr:53 until close.
func startDNS(addr netip.Addr, kube kubernetes.Interface, domain string) (*clusterDNS, error) {
	conn, err := net.ListenPacket("udp", netip.AddrPortFrom(addr, 53).String())
	if err != nil {
		return nil, err
	}
	d := &clusterDNS{conn: conn, kube: kube, domain: strings.Trim(domain, ".")}
	d.wg.Add(1)
	go d.serve()
	return d, nil
}

func (d *clusterDNS) close() {
	_ = d.conn.Close()
	d.wg.Wait()
}

func (d *clusterDNS) serve() {
	defer d.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		if resp, err := d.answer(buf[:n]); err == nil {
			_, _ = d.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query; a query it cannot parse gets no answer.
func (d *clusterDNS) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	ips, found := d.lookup(q.Name.String())
	if !found {
		resp.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, resp)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, ip := range ips {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}
		switch {
		case q.Type == dnsmessage.TypeA && ip.Is4():
			err = b.AResource(rh, dnsmessage.AResource{A: ip.As4()})
		case q.Type == dnsmessage.TypeAAAA && ip.Is6():
			err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: ip.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// lookup resolves a cluster name; found is false for a name that does not exist.
func (d *clusterDNS) lookup(name string) (ips []netip.Addr, found bool) {
	rest, ok := strings.CutSuffix(strings.TrimSuffix(name, "."), ".svc."+d.domain)
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	switch len(parts) {
	case 2: // <svc>.<ns>
		svc, err := d.kube.CoreV1().Services(parts[1]).Get(ctx, parts[0], metav1.GetOptions{})
		if err != nil {
			return nil, false
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
			return []netip.Addr{ip}, err == nil
		}
		pods, err := d.selected(ctx, svc)
		if err != nil {
			return nil, false
		}
		for _, p := range pods {
			if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
				ips = append(ips, ip)
			}
		}
		return ips, true
	case 3: // <hostname>.<svc>.<ns>
		pods, err := d.kube.CoreV1().Pods(parts[2]).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, false
		}
		for _, p := range pods.Items {
			if p.Spec.Hostname == parts[0] && p.Spec.Subdomain == parts[1] {
				ip, err := netip.ParseAddr(p.Status.PodIP)
				return []netip.Addr{ip}, err == nil
			}
		}
	}
	return nil, false
}

// selected returns the pods a Service's endpoints would hold: those it selects that have an
// IP and are ready (or all of them with publishNotReadyAddresses).
func (d *clusterDNS) selected(ctx context.Context, svc *corev1.Service) ([]corev1.Pod, error) {
	if len(svc.Spec.Selector) == 0 {
		return nil, errors.New("no selector")
	}
	list, err := d.kube.CoreV1().Pods(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		if svc.Spec.PublishNotReadyAddresses || isReady(&p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
