package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdSystem is the idempotency layer a team would build on etcd without
// Carmy: the call's identity is the key /vsetcd/<principal>/<session>/<id>,
// reserved with a put-if-absent transaction before the tool runs, and its
// result put after. A client per member (one gRPC connection each, shared
// by every caller), so that each call goes to the member its caller's
// turn names, as the Carmy side sends each call to one node.
type etcdSystem struct {
	clients     []*clientv3.Client
	prefix      string
	reservation string // the reserved record, the same for every call
	outcome     string // the finished record, with the tool's result
}

func newEtcd(o options, runID string) (*etcdSystem, error) {
	args := randomText(o.ArgsSize)
	sum := sha256.Sum256([]byte(`{"payload":"` + args + `"}`))
	fp := hex.EncodeToString(sum[:])
	s := &etcdSystem{
		prefix:      "/vsetcd/bench/vsetcd-" + runID + "/",
		reservation: `{"status":"running","tool":"echo","fingerprint":"` + fp + `"}`,
		outcome:     `{"status":"succeeded","tool":"echo","fingerprint":"` + fp + `","result":{"payload":"` + args + `"}}`,
	}
	for _, t := range o.Targets {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{"http://" + t},
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			s.close()
			return nil, fmt.Errorf("etcd client for %s: %w", t, err)
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

// newCall reserves key if it is absent, then records the result: two
// linearizable writes, each committed by a quorum and synced to disk.
func (s *etcdSystem) newCall(ctx context.Context, t int, key string) error {
	c, k := s.clients[t], s.prefix+key
	tx, err := c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, s.reservation)).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	if !tx.Succeeded {
		return errors.New("reserve: the key exists already")
	}
	if _, err := c.Put(ctx, k, s.outcome); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	return nil
}

// replay reads the finished record of key: a linearizable Get (the
// client's default, serializable=false), which goes through the leader.
func (s *etcdSystem) replay(ctx context.Context, t int, key string) error {
	r, err := s.clients[t].Get(ctx, s.prefix+key)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if len(r.Kvs) != 1 || !bytes.HasPrefix(r.Kvs[0].Value, []byte(`{"status":"succeeded"`)) {
		return fmt.Errorf("get: %d keys, not the finished record", len(r.Kvs))
	}
	return nil
}

func (s *etcdSystem) close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
}
