package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/store/audit"
)

// `carmy audit export|verify` reads the audit ledger (docs/audit.md):
// export pages through GET /v1/audit of one node, verify checks an export
// offline.

const auditUsage = `Usage: carmy audit <command> [flags]

Exports and verifies the audit ledger: one entry per decision about an
execution and per admin action, hash-chained (docs/audit.md).

Commands:
  export [--after SEQ] > FILE      write the ledger (NDJSON) from the entry after SEQ
  verify FILE [--head HASH] [--public-key PEM]
                                   check the chain of an export offline; print its head
  keygen --out FILE                write a new Ed25519 signing key (PEM, PKCS #8, mode 0600)
                                   for audit.signing_key; print its public key (PEM)

export flags:
  --addr host:port   the node to ask; http:// or https:// URLs too (default 127.0.0.1:8080) [$CARMY_ADDR]
  --ca-file PEM      CA certificates to trust for https:// besides the system's [$CARMY_CA_FILE]
  --token secret     the admin token, sent as Authorization: Bearer [$CARMY_ADMIN_TOKEN]
  --after SEQ        start after this entry (default 0: from the first kept)
  --timeout d        bound on each page's request (default 30s)

verify flags:
  --head HASH        the hash the export must end with (GET /v1/audit/head)
  --public-key PEM   the public key of audit.signing_key: every checkpoint entry's
                     signature must verify by it

verify exits 0 when every line verifies (and the head is HASH), else 1, naming
the first seq that does not. With --public-key it says how many signed
checkpoints verified and the last seq signed.

Examples:
  carmy audit export --addr 10.0.0.1:8080 > ledger.ndjson
  carmy audit verify ledger.ndjson --head 3c5e…
  carmy audit keygen --out /etc/carmy/audit.key > audit.pub
  carmy audit verify ledger.ndjson --public-key audit.pub
`

// exportPage is how many entries export asks for at a time.
const exportPage = 1000

// auditCmd runs `carmy audit args…`.
func auditCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, auditUsage)
		return errUsage
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("carmy audit "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "carmy audit %s: %s\n\nRun 'carmy audit --help' for the usage.\n", sub, fmt.Sprintf(format, a...))
		return errUsage
	}
	parse := func() ([]string, error) {
		var pos []string
		for {
			if err := fs.Parse(rest); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					fmt.Fprint(stdout, auditUsage)
					return nil, flag.ErrHelp
				}
				fmt.Fprintf(stderr, "\nRun 'carmy audit --help' for the usage.\n")
				return nil, errUsage
			}
			if fs.NArg() == 0 {
				return pos, nil
			}
			pos = append(pos, fs.Arg(0))
			rest = fs.Args()[1:]
		}
	}
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, auditUsage)
		return nil
	case "export":
		opts := clusterOptions{Addr: "127.0.0.1:8080", Token: getenv(envAdminToken), CAFile: getenv(certs.EnvCAFile), Timeout: 30 * time.Second}
		if a := getenv(envClusterAddr); a != "" {
			opts.Addr = a
		}
		var after uint64
		fs.StringVar(&opts.Addr, "addr", opts.Addr, "")
		fs.StringVar(&opts.Token, "token", opts.Token, "")
		fs.StringVar(&opts.CAFile, "ca-file", opts.CAFile, "")
		fs.DurationVar(&opts.Timeout, "timeout", opts.Timeout, "")
		fs.Uint64Var(&after, "after", 0, "")
		pos, err := parse()
		if err != nil {
			return helpIsNil(err)
		}
		if len(pos) > 0 {
			return usageErr("unexpected argument %q (the export goes to stdout)", pos[0])
		}
		base, err := baseURL(opts.Addr)
		if err != nil {
			return usageErr("%v", err)
		}
		c, err := newAdminClient(opts, base)
		if err != nil {
			return usageErr("%v", err)
		}
		return auditExport(ctx, c, opts, after, stdout, stderr)
	case "verify":
		var head, pubFile string
		fs.StringVar(&head, "head", "", "")
		fs.StringVar(&pubFile, "public-key", "", "")
		pos, err := parse()
		if err != nil {
			return helpIsNil(err)
		}
		if len(pos) != 1 {
			return usageErr("give one file to verify (or - for stdin)")
		}
		var pub ed25519.PublicKey
		if pubFile != "" {
			data, err := os.ReadFile(pubFile)
			if err != nil {
				return usageErr("--public-key: %v", err)
			}
			if pub, err = audit.ParsePublicKey(data); err != nil {
				return usageErr("--public-key %s: %v", pubFile, err)
			}
		}
		return auditVerify(pos[0], head, pub, stdout)
	case "keygen":
		var out string
		fs.StringVar(&out, "out", "", "")
		pos, err := parse()
		if err != nil {
			return helpIsNil(err)
		}
		if len(pos) > 0 || out == "" {
			return usageErr("give --out FILE, and nothing else")
		}
		return auditKeygen(out, stdout)
	default:
		fmt.Fprintf(stderr, "carmy audit: unknown command %q\n\n%s", sub, auditUsage)
		return errUsage
	}
}

func helpIsNil(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// auditExport writes the ledger after seq after to stdout, page by page:
// the first page as it comes (with its checkpoint line, if any), the
// next ones without theirs, each of which must name the last entry
// written (else the ledger was pruned past it meanwhile).
func auditExport(ctx context.Context, c *client.Client, opts clusterOptions, after uint64, stdout, stderr io.Writer) error {
	var last audit.Head
	entries := 0
	for first := true; ; first = false {
		pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		page, err := c.AuditPage(pctx, after, exportPage)
		cancel()
		if err != nil {
			return fmt.Errorf("GET /v1/audit?after=%d: %w", after, err)
		}
		n := 0
		for line := range bytes.Lines(page) {
			// The anchor line is {"checkpoint":{…}}; an entry (one of
			// kind checkpoint included) starts with its "actor".
			var e struct {
				Checkpoint *audit.Head `json:"checkpoint"`
				Seq        uint64      `json:"seq"`
				Hash       string      `json:"hash"`
			}
			if err := json.Unmarshal(line, &e); err != nil {
				return fmt.Errorf("GET /v1/audit?after=%d: a line that is not JSON: %w", after, err)
			}
			if bytes.HasPrefix(line, []byte(`{"checkpoint":`)) {
				if !first && *e.Checkpoint != last {
					return fmt.Errorf("the ledger was pruned past seq %d while it was exported: export again", last.Seq)
				}
				if !first {
					continue
				}
			} else {
				last = audit.Head{Seq: e.Seq, Hash: e.Hash}
				n++
			}
			if _, err := stdout.Write(line); err != nil {
				return err
			}
		}
		entries += n
		if n == 0 {
			break
		}
		after = last.Seq
	}
	fmt.Fprintf(stderr, "exported %d entries, up to seq %d\n", entries, last.Seq)
	return nil
}

// auditVerify verifies the export in file ("-": stdin) and prints its
// head; a chain that does not verify, or whose head is not head (when
// given), is an error naming why.
func auditVerify(file, head string, pub ed25519.PublicKey, stdout io.Writer) error {
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	v, err := audit.VerifyWith(r, pub)
	from := "the first entry"
	if v.Anchor.Seq > 0 {
		from = fmt.Sprintf("the checkpoint of seq %d (%s), taken as given", v.Anchor.Seq, v.Anchor.Hash)
	}
	if err != nil {
		return fmt.Errorf("%s: %w (the %d entries before it verify, from %s)", file, err, v.Entries, from)
	}
	fmt.Fprintf(stdout, "verified %d entries from %s\n", v.Entries, from)
	fmt.Fprintf(stdout, "head: seq %d hash %s\n", v.Head.Seq, v.Head.Hash)
	if pub != nil {
		fmt.Fprintf(stdout, "verified %d signed checkpoints by key %s; the last signs seq %d\n", v.Checkpoints, audit.KeyID(pub), v.LastSigned)
	}
	if head != "" && head != v.Head.Hash {
		return fmt.Errorf("%s: the export ends at seq %d with hash %s, not the --head %s: entries after it are missing, or the chain differs", file, v.Head.Seq, v.Head.Hash, head)
	}
	return nil
}

// auditKeygen writes a new Ed25519 private key to file (PEM, PKCS #8, mode
// 0600, never over an existing file) and its public key to stdout.
func auditKeygen(file string, stdout io.Writer) error {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return err
	}
	private, public, err := audit.MarshalKeys(key)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(private); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = stdout.Write(public)
	return err
}
