// The audit ledger's panel: its head (GET /v1/audit/head) and, on demand,
// a verification of its chain in the browser (docs/audit.md): the page
// reads the whole export through GET /v1/audit, a page at a time, and
// recomputes every hash with WebCrypto's SHA-256. An entry's line is the
// canonical JSON of the entry; the bytes its hash covers are that line
// without its top-level "hash" member, which always sits between
// "fingerprint" and "kind" (a checkpoint entry's signed head holds a
// "hash" too, inside "checkpoint": it stays). Signatures of checkpoint
// entries are not checked here: `carmy audit verify --public-key` does.

const PAGE = 1000;
const HASH_MEMBER = /,"hash":"[0-9a-f]{64}"(?=,"kind":)/;
const GENESIS = '0'.repeat(64);

async function sha256hex(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

// canVerify reports whether this browser offers SHA-256 here: WebCrypto
// is only available to a page served over HTTPS or from localhost.
export function canVerify() {
  return Boolean(globalThis.crypto && crypto.subtle);
}

// verify reads the ledger through getText (api.getText) and checks its
// chain: each entry's seq follows the previous one, its prev_hash is the
// previous hash, its hash is recomputed. It resolves to {ok, entries,
// anchor, head: {seq, hash}, bad?: {seq, reason}}; progress(n) is told
// how many entries were checked so far.
export async function verify(getText, progress) {
  let head = { seq: 0, hash: GENESIS };
  let anchor = null;
  let entries = 0;
  for (let after = 0, first = true; ; first = false) {
    const text = await getText(`v1/audit?after=${after}&limit=${PAGE}`);
    let n = 0;
    for (const line of text.split('\n')) {
      if (!line) continue;
      const e = JSON.parse(line);
      if (line.startsWith('{"checkpoint":')) {
        // The anchor of an export that does not start at entry 1.
        if (first && entries === 0) {
          anchor = e.checkpoint;
          head = { seq: anchor.seq, hash: anchor.hash };
        }
        continue;
      }
      let reason = '';
      if (e.seq !== head.seq + 1) reason = `seq ${e.seq}, want ${head.seq + 1}`;
      else if (e.prev_hash !== head.hash) reason = `prev_hash is not the hash of seq ${head.seq}`;
      else if (!HASH_MEMBER.test(line)) reason = 'no hash member where the canonical JSON has it';
      else if (await sha256hex(e.prev_hash + line.replace(HASH_MEMBER, '')) !== e.hash) reason = 'hash does not match the entry';
      if (reason) return { ok: false, entries, anchor, head, bad: { seq: head.seq + 1, reason } };
      head = { seq: e.seq, hash: e.hash };
      entries++;
      n++;
    }
    if (progress) progress(entries);
    if (n === 0) break;
    after = head.seq;
  }
  return { ok: true, entries, anchor, head };
}
