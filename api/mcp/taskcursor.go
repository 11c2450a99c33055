package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// A tasks/list cursor names the oldest task of the page before it — an
// execution id, which its caller already holds — rather than the store's
// position of that task: that position is the cluster's global sequence
// of reservations, which would tell a tenant how many calls every other
// principal makes. The id is looked up again for the next page, so a
// cursor works on every node, needs no key, and survives restarts; it is
// opaque (base64url, versioned) so that clients do not build their own.

// taskCursorPrefix begins a decoded cursor: its version.
const taskCursorPrefix = "t1:"

// errBadCursor answers a cursor that is not one tasks/list gave, or whose
// task is gone (expired or released) since.
var errBadCursor = errors.New("tasks/list: the cursor is not one this server gave, or its task no longer exists: list again without a cursor")

// encodeTaskCursor returns the cursor of the page after the one whose
// oldest task is executionID.
func encodeTaskCursor(executionID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(taskCursorPrefix + executionID))
}

// decodeTaskCursor returns the position (engine.ListRequest.Before) of
// the page cursor names for caller: errBadCursor for a cursor that does
// not decode, or whose task is not the caller's own or no longer exists;
// another error of the store as it is.
func decodeTaskCursor(ctx context.Context, rt Runtime, caller engine.Caller, cursor string) (uint64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	id, ok := strings.CutPrefix(string(raw), taskCursorPrefix)
	if err != nil || !ok || id == "" {
		return 0, errBadCursor
	}
	rec, err := rt.Execution(ctx, caller, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, errBadCursor
	case err != nil:
		return 0, err
	case rec.Key.Principal != caller.Principal || rec.Seq == 0:
		return 0, errBadCursor
	}
	return rec.Seq, nil
}
