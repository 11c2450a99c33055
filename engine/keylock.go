package engine

import (
	"context"
	"sync"
)

// keyLocks is a mutex per key (an execution id), for work on one
// execution that must not overlap on this node. An entry exists only
// while its lock is held or waited for, so the table holds no more than
// the callers at it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	held chan struct{} // one slot: full while the lock is held
	refs int           // holders and waiters
}

// lock takes key's lock, waiting while another holds it, until ctx ends
// (then it returns ctx's error and holds nothing). The unlock it returns
// must be called once.
func (k *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*keyLock)
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{held: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	select {
	case l.held <- struct{}{}:
		return func() {
			<-l.held
			k.drop(key, l)
		}, nil
	case <-ctx.Done():
		k.drop(key, l)
		return nil, ctx.Err()
	}
}

// drop forgets one holder or waiter of l, and l once it has none.
func (k *keyLocks) drop(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(k.m, key)
	}
}
