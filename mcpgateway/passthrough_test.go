package mcpgateway_test

import (
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestPassthroughOverStdio: a stdio server's resources, template and
// prompt are listed under its prefix and read and got through the
// directory; a read whose answer is past the bound is RESULT_TOO_LARGE
// (the child is replaced, and the next read is answered); a caller that
// may not see the server gets NOT_FOUND.
func TestPassthroughOverStdio(t *testing.T) {
	rt := newRuntime(t)
	u, err := mcpgateway.New(rt, mcpgateway.Config{Name: "st", Command: []string{stdioServer(t)}, Logger: quietLogger(),
		MaxAnswerBytes: mcpgateway.MinAnswerBytes, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dir := mcpgateway.NewDirectory([]*mcpgateway.Upstream{u})
	if err := u.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	all := func(string) bool { return true }
	none := func(string) bool { return false }
	wait.Until(t, 30*time.Second, "the resources to be listed", func() bool { return len(dir.Resources(all)) > 0 })
	if res, prompts := dir.Offers(); !res || !prompts {
		t.Errorf("Offers: %v %v", res, prompts)
	}
	rs, ts, ps := dir.Resources(all), dir.ResourceTemplates(all), dir.Prompts(all)
	if len(rs) != 1 || rs[0].URI != "carmy:st/mem://hello" || len(ts) != 1 || ts[0].URITemplate != "carmy:st/mem://bytes/{n}" ||
		len(ps) != 1 || ps[0].Name != "st.greet" {
		t.Fatalf("listed %+v %+v %+v", rs, ts, ps)
	}
	if n := len(dir.Resources(none)) + len(dir.ResourceTemplates(none)) + len(dir.Prompts(none)); n != 0 {
		t.Errorf("a caller who may not see st lists %d", n)
	}
	read, err := dir.ReadResource(t.Context(), "carmy:st/mem://hello", all)
	if err != nil || len(read.Contents) != 1 || read.Contents[0].URI != "carmy:st/mem://hello" || read.Contents[0].Text != "hello" {
		t.Errorf("read: %+v %v", read, err)
	}
	got, err := dir.GetPrompt(t.Context(), "st.greet", map[string]string{"who": "Bo"}, all)
	if err != nil || len(got.Messages) != 2 || got.Messages[0].Content.(*mcp.TextContent).Text != "Hello Bo" ||
		got.Messages[1].Content.(*mcp.ResourceLink).URI != "carmy:st/mem://hello" {
		t.Errorf("get: %+v %v", got, err)
	}
	for _, err := range []error{
		func() error { _, err := dir.ReadResource(t.Context(), "carmy:st/mem://hello", none); return err }(),
		func() error { _, err := dir.GetPrompt(t.Context(), "st.greet", nil, none); return err }(),
		func() error { _, err := dir.ReadResource(t.Context(), "mem://hello", all); return err }(),
		func() error { _, err := dir.GetPrompt(t.Context(), "other.greet", nil, all); return err }(),
	} {
		if store.CodeOf(err) != store.CodeNotFound {
			t.Errorf("not visible or nobody's: %v, want NOT_FOUND", err)
		}
	}
	// Within the bound, and past it.
	if read, err := dir.ReadResource(t.Context(), "carmy:st/mem://bytes/1000", all); err != nil || len(read.Contents[0].Text) != 1000 {
		t.Errorf("a read of 1000 bytes: %v", err)
	}
	_, err = dir.ReadResource(t.Context(), "carmy:st/mem://bytes/200000", all)
	if store.CodeOf(err) != engine.CodeResultTooLarge {
		t.Errorf("a read of 200000 bytes: %v, want RESULT_TOO_LARGE", err)
	}
	// The child was replaced; reads go on once it is back.
	wait.For(t, 30*time.Second, "reads after the child was replaced", func() error {
		read, err = dir.ReadResource(t.Context(), "carmy:st/mem://hello", all)
		if err != nil && store.CodeOf(err) != store.CodeUnavailable {
			t.Fatalf("after the child was replaced: %v", err)
		}
		return err
	})
	if len(read.Contents) != 1 || read.Contents[0].Text != "hello" {
		t.Errorf("after the child was replaced: %+v", read)
	}
}
