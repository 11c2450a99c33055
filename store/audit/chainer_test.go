package audit_test

import (
	"bytes"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/carmyhq/carmy/store/audit"
)

// TestChainerMatchesNextAndLine holds the Chainer to what it stands in
// for: over a chain of random drafts (any bytes in their strings,
// checkpoints among them), each line it appends, the entry and the head
// are those of Head.Next and Entry.Line, and what dst held before is
// left as it was.
func TestChainerMatchesNextAndLine(t *testing.T) {
	anyText := rapid.OneOf(
		rapid.String(),
		rapid.Custom(func(t *rapid.T) string { return string(rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")) }),
		rapid.SampledFrom([]string{"", `"`, `\`, "\n", "\u2028", "\xff", `,"kind":"x"`, "agent-7"}),
	)
	rapid.Check(t, func(t *rapid.T) {
		var c audit.Chainer
		head := audit.Start
		if rapid.Bool().Draw(t, "anchored") {
			head = audit.Head{Seq: rapid.Uint64Range(0, 1<<40).Draw(t, "seq"), Hash: anyText.Draw(t, "anchor")}
		}
		dst := []byte(anyText.Draw(t, "before"))
		for i := range rapid.IntRange(1, 6).Draw(t, "entries") {
			_ = i
			d := audit.Draft{
				Time:        time.Unix(0, rapid.Int64().Draw(t, "ns")).In(time.FixedZone("x", 3600)),
				Kind:        audit.Kind(anyText.Draw(t, "kind")),
				ExecutionID: anyText.Draw(t, "execution_id"), Principal: anyText.Draw(t, "principal"),
				Actor: anyText.Draw(t, "actor"), Tool: anyText.Draw(t, "tool"),
				Fingerprint: anyText.Draw(t, "fingerprint"), Status: anyText.Draw(t, "status"),
				Target: anyText.Draw(t, "target"),
			}
			if rapid.Bool().Draw(t, "checkpoint") {
				d.Checkpoint = &audit.Signed{Seq: rapid.Uint64().Draw(t, "cseq"), Hash: anyText.Draw(t, "chash"),
					Signature: anyText.Draw(t, "sig"), KeyID: anyText.Draw(t, "key")}
			}
			want, wantHead := head.Next(d, nil)
			wantLine := want.Line(nil)
			before := bytes.Clone(dst)
			var got audit.Entry
			var gotHead audit.Head
			dst, got, gotHead = c.AppendNext(dst, head, d)
			if !bytes.Equal(dst[:len(before)], before) {
				t.Fatalf("AppendNext changed what dst held: %q, want %q", dst[:len(before)], before)
			}
			if line := dst[len(before):]; !bytes.Equal(line, wantLine) {
				t.Fatalf("line\n%q\nwant\n%q", line, wantLine)
			}
			if gotHead != wantHead || got.Hash != want.Hash || got.Seq != want.Seq || got.PrevHash != want.PrevHash || !got.Time.Equal(want.Time) {
				t.Fatalf("entry %+v head %+v, want %+v head %+v", got, gotHead, want, wantHead)
			}
			head = gotHead
		}
	})
}
