package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/carmyhq/carmy/internal/egress"
	"github.com/carmyhq/carmy/store"
)

// MaxPendingNotifications bounds the approval notifications a node holds
// (being sent or waiting to be tried again); one more is dropped, logged
// and counted (NotifyDropped).
const MaxPendingNotifications = 1024

// The delivery of a notification: at most notifyConcurrency requests at
// once, each bounded by notifyAttemptTimeout; after a failure the next
// attempt comes notifyFirstBackoff later, the wait doubling up to
// notifyMaxBackoff, for as long as the gate has not expired.
const (
	notifyConcurrency    = 8
	notifyAttemptTimeout = 10 * time.Second
	notifyFirstBackoff   = time.Second
	notifyMaxBackoff     = time.Minute
)

// notifier holds the node's pending approval notifications: slots bounds
// them, sends bounds the requests in flight, and ctx ends at Shutdown.
type notifier struct {
	slots chan struct{}
	sends chan struct{}
	ctx   context.Context
	stop  context.CancelFunc
}

func newNotifier() *notifier {
	ctx, stop := context.WithCancel(context.Background())
	return &notifier{
		slots: make(chan struct{}, MaxPendingNotifications),
		sends: make(chan struct{}, notifyConcurrency),
		ctx:   ctx, stop: stop,
	}
}

// notifyApproval queues the notification of rec, an execution this node
// has just reserved awaiting approval, when its tool t has a webhook. It
// never blocks: when the queue is full the notification is dropped. A
// retry of the call, answered from the record, never comes here: one
// notification per execution.
func (r *Runtime) notifyApproval(t *tool, rec store.Record) {
	if t.Approval == nil || t.Approval.Notify == nil || rec.Approval == nil {
		return
	}
	to := t.Approval.Notify
	select {
	case r.notes.slots <- struct{}{}:
	default:
		r.cfg.Logger.Warn("approval notification dropped: too many pending", slog.String("execution_id", rec.ExecutionID),
			slog.String("tool", rec.Tool), slog.Int("pending", MaxPendingNotifications))
		r.notified(NotifyDropped)
		return
	}
	n := ApprovalNotice{ExecutionID: rec.ExecutionID, Tool: rec.Tool, Principal: rec.Key.Principal, SessionID: rec.Key.Session,
		ExpiresAt: rec.Approval.ExpiresAt}
	r.bg.add()
	go func() {
		defer r.bg.done()
		defer func() { <-r.notes.slots }()
		r.deliver(to, n)
	}()
}

// deliver sends n to to until a 2xx answer, waiting longer after each
// failure, and gives up once the next attempt would come at or after the
// gate's expiry, or when the node stops.
func (r *Runtime) deliver(to *ApprovalNotify, n ApprovalNotice) {
	body, err := json.Marshal(n)
	if err != nil { // a notice always encodes
		r.cfg.Logger.Error("approval notification: encoding", slog.String("execution_id", n.ExecutionID), slog.Any("err", err))
		return
	}
	log := r.cfg.Logger.With(slog.String("execution_id", n.ExecutionID), slog.String("tool", n.Tool), slog.String("url", to.shown))
	wait := notifyFirstBackoff
	for attempt := 1; ; attempt++ {
		err := r.notes.send(to, n.ExecutionID, body)
		if err == nil {
			r.notified(NotifySent)
			log.Info("approval notification sent", slog.Int("attempt", attempt))
			return
		}
		r.notified(NotifyFailed)
		if !r.now().Add(wait).Before(n.ExpiresAt) {
			r.notified(NotifyGaveUp)
			log.Warn("approval notification: giving up, the gate expires first", slog.Int("attempts", attempt), slog.String("err", err.Error()))
			return
		}
		log.Info("approval notification failed; trying again", slog.Int("attempt", attempt), slog.Duration("in", wait), slog.String("err", err.Error()))
		t := time.NewTimer(wait)
		select {
		case <-r.notes.ctx.Done():
			t.Stop()
			r.notified(NotifyGaveUp)
			log.Warn("approval notification: not sent, the node stops", slog.Int("attempts", attempt))
			return
		case <-t.C:
		}
		wait = min(2*wait, notifyMaxBackoff)
	}
}

// send POSTs body once: nil for a 2xx answer. Its error never repeats the
// URL (egress.Describe).
func (nt *notifier) send(to *ApprovalNotify, id string, body []byte) error {
	select {
	case nt.sends <- struct{}{}:
		defer func() { <-nt.sends }()
	case <-nt.ctx.Done():
		return nt.ctx.Err()
	}
	ctx, cancel := context.WithTimeout(nt.ctx, notifyAttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the request could not be built")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", id)
	req.Header.Set("User-Agent", "carmy")
	resp, err := to.client.Do(req)
	if err != nil {
		return fmt.Errorf("no answer: %s", egress.Describe(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	return nil
}

// notified tells the observers of a notification's result.
func (r *Runtime) notified(result string) {
	if o, ok := r.obs.(NotifyObserver); ok {
		o.ApprovalNotified(result)
	}
}
