package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/carmyhq/carmy/api/wire"
)

// AuditHead asks for the head of the node's audit ledger (GET
// /v1/audit/head; the admin token).
func (c *Client) AuditHead(ctx context.Context) (*wire.AuditHead, error) {
	var h wire.AuditHead
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: "/v1/audit/head", idempotent: true}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// AuditPage returns one page of the node's audit ledger (GET
// /v1/audit?after=…&limit=…; the admin token) as it came: NDJSON lines,
// a checkpoint line first unless the page starts at the first entry
// (docs/audit.md). limit 0 is the server's default.
func (c *Client) AuditPage(ctx context.Context, after uint64, limit int) ([]byte, error) {
	path := "/v1/audit?after=" + strconv.FormatUint(after, 10)
	if limit > 0 {
		path += "&limit=" + strconv.Itoa(limit)
	}
	var page rawBody
	if _, err := c.do(ctx, &request{method: http.MethodGet, path: path, idempotent: true}, &page); err != nil {
		return nil, err
	}
	return page, nil
}

// rawBody is an answer kept as its bytes, not decoded.
type rawBody []byte
