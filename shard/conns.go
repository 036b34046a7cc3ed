package shard

import (
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// connPool holds one client connection per owner address, shared by every relayed stream.
// Connections live until the replica stops (a ring has few members). Every connection uses
// creds: the replica's mTLS, which accepts only an owner that proves the destination identity.
type connPool struct {
	creds  credentials.TransportCredentials
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

// newConnPool returns a pool dialing with creds (nil: plaintext).
func newConnPool(creds credentials.TransportCredentials) *connPool {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return &connPool{creds: creds, conns: map[string]*grpc.ClientConn{}}
}

func (p *connPool) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(p.creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

type poolError string

func (e poolError) Error() string { return string(e) }

const errPoolClosed = poolError("replica is stopping")
