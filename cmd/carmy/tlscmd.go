package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/didyoumean"
)

const tlsUsage = `Usage: carmy tls <command> [flags]

Makes the cluster CA and the node certificates of mutual TLS between nodes
(--node-tls-ca, --node-tls-cert, --node-tls-key of carmy serve).

Commands:
  ca                     write carmy-ca.pem and carmy-ca-key.pem (a CA for 5 years)
  cert --node-id ID      write ID.pem and ID-key.pem, signed by the CA (for 1 year): a
                         node certificate, with the node role (URI SAN urn:carmy:role:node)
  cert --role api --name NAMES
                         write api.pem and api-key.pem, signed by the CA: a server
                         certificate for the API (--tls-cert), without the node role

Flags:
  --dir dir              where the files are read and written (default .)
  --days n               lifetime in days (default 1825 for the CA, 365 for a certificate)
cert flags:
  --role node|api        what the certificate is for (default node)
  --node-id ID           the node's --node-id (also a DNS name of the certificate)
  --dns names            more DNS names, comma-separated
  --ip addresses         IP addresses, comma-separated (127.0.0.1 and ::1 are always in
                         a node certificate)
  --name names           with --role api: its DNS names and IP addresses, comma-separated

Nodes refuse, on Raft and on their internal endpoints, a peer whose certificate of
the CA lacks the node role: an API certificate cannot make its holder a node.
Certificates made before the role existed must be made again (carmy tls cert).

Keep carmy-ca-key.pem off the nodes: a node needs carmy-ca.pem, its certificate
and its key. Renew a certificate by writing new files over the old ones; nodes
read them again within seconds, without a restart.

Examples:
  carmy tls ca --dir /etc/carmy/tls
  carmy tls cert --dir /etc/carmy/tls --node-id n1 --ip 10.0.0.1 --dns n1.carmy.internal
  carmy tls cert --dir /etc/carmy/tls --role api --name carmy.example.com,10.0.0.1
`

// tlsCmd runs `carmy tls ca|cert`.
func tlsCmd(args []string, now time.Time, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, tlsUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	fs := flag.NewFlagSet("carmy tls "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", ".", "")
	days := fs.Int("days", 0, "")
	nodeID := fs.String("node-id", "", "")
	dns := fs.String("dns", "", "")
	ips := fs.String("ip", "", "")
	role := fs.String("role", "node", "")
	names := fs.String("name", "", "")
	fs.Usage = func() {}
	if err := fs.Parse(args[1:]); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, tlsUsage)
		return nil
	} else if err != nil {
		fmt.Fprintf(stderr, "carmy tls %s: %s\n\n%s", args[0], didyoumean.FlagError(err, fs), tlsUsage)
		return errUsage
	}
	if fs.NArg() > 0 || *days < 0 {
		fmt.Fprintf(stderr, "carmy tls: unexpected %q\n\n%s", strings.Join(fs.Args(), " "), tlsUsage)
		return errUsage
	}
	caCert, caKey := filepath.Join(*dir, "carmy-ca.pem"), filepath.Join(*dir, "carmy-ca-key.pem")
	switch args[0] {
	case "ca":
		// The folder holds a CA key: made for its owner alone.
		if err := os.MkdirAll(*dir, 0o700); err != nil {
			return fmt.Errorf("carmy tls ca: %w", err)
		}
		life := certs.CALifetime
		if *days > 0 {
			life = time.Duration(*days) * 24 * time.Hour
		}
		c, k, err := certs.NewCA("Carmy cluster CA", life, now)
		if err != nil {
			return err
		}
		if err := writeNew(caCert, c, 0o644); err != nil {
			return err
		}
		if err := writeNew(caKey, k, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", caCert, caKey)
		return nil
	case "cert":
		switch {
		case *role == "api":
			return apiCert(*dir, caCert, caKey, *names, *dns, *ips, *nodeID, *days, now, stdout)
		case *role != "node":
			fmt.Fprintf(stderr, "carmy tls cert: --role %q: want node or api\n\n%s", *role, tlsUsage)
			return errUsage
		case *names != "":
			fmt.Fprintf(stderr, "carmy tls cert: --name goes with --role api (a node certificate takes --node-id, --dns and --ip)\n\n%s", tlsUsage)
			return errUsage
		}
		if *nodeID == "" {
			fmt.Fprintf(stderr, "carmy tls cert: --node-id is required\n\n%s", tlsUsage)
			return errUsage
		}
		addrs, err := parseIPs(*ips)
		if err != nil {
			return err
		}
		cp, kp, err := readCA(caCert, caKey)
		if err != nil {
			return err
		}
		c, k, err := certs.NewNodeCert(cp, kp, *nodeID, splitList(*dns), addrs, lifetime(*days), now)
		if err != nil {
			return err
		}
		certFile, keyFile := filepath.Join(*dir, *nodeID+".pem"), filepath.Join(*dir, *nodeID+"-key.pem")
		// A node certificate may be renewed in place: nodes reload it.
		if err := writePair(certFile, keyFile, c, k); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s\n", certFile, keyFile)
		return nil
	}
	fmt.Fprintf(stderr, "carmy tls: unknown command %q\n\n%s", args[0], tlsUsage)
	return errUsage
}

// apiCert writes api.pem and api-key.pem (0600) into dir: a server
// certificate of the CA for the API, named by names (DNS names and IPs,
// comma-separated) plus dns and ips, without the node role.
func apiCert(dir, caCert, caKey, names, dns, ips, nodeID string, days int, now time.Time, stdout io.Writer) error {
	if nodeID != "" {
		return fmt.Errorf("carmy tls cert --role api: --node-id names a node; give the API's names with --name")
	}
	var dnsNames []string
	var addrs []net.IP
	for _, n := range append(splitList(names), splitList(dns)...) {
		if ip := net.ParseIP(n); ip != nil {
			addrs = append(addrs, ip)
		} else {
			dnsNames = append(dnsNames, n)
		}
	}
	more, err := parseIPs(ips)
	if err != nil {
		return err
	}
	addrs = append(addrs, more...)
	if len(dnsNames) == 0 && len(addrs) == 0 {
		return fmt.Errorf("carmy tls cert --role api: --name is required (the API's DNS names and IP addresses, comma-separated)")
	}
	cp, kp, err := readCA(caCert, caKey)
	if err != nil {
		return err
	}
	c, k, err := certs.NewAPICert(cp, kp, dnsNames, addrs, lifetime(days), now)
	if err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	if err := writePair(certFile, keyFile, c, k); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s (an API certificate: no node role)\n", certFile, keyFile)
	return nil
}

// parseIPs reads --ip: comma-separated IP addresses.
func parseIPs(list string) ([]net.IP, error) {
	var addrs []net.IP
	for _, s := range splitList(list) {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("carmy tls cert: --ip %q is not an IP address", s)
		}
		addrs = append(addrs, ip)
	}
	return addrs, nil
}

// readCA reads the CA's certificate and key that sign a certificate.
func readCA(certPath, keyPath string) (cert, key []byte, err error) {
	if cert, err = os.ReadFile(certPath); err != nil {
		return nil, nil, fmt.Errorf("carmy tls cert: the CA (carmy tls ca makes one): %w", err)
	}
	if key, err = os.ReadFile(keyPath); err != nil {
		return nil, nil, fmt.Errorf("carmy tls cert: the CA key: %w", err)
	}
	return cert, key, nil
}

// lifetime is --days as a duration, or a node certificate's default.
func lifetime(days int) time.Duration {
	if days > 0 {
		return time.Duration(days) * 24 * time.Hour
	}
	return certs.NodeLifetime
}

// writePair writes a certificate (0644) and its key (0600), each replaced
// whole (a node reloading them never reads half of one), the key 0600
// whatever the file it replaces was.
func writePair(certFile, keyFile string, cert, key []byte) error {
	if err := replaceFile(keyFile, key, 0o600); err != nil {
		return err
	}
	return replaceFile(certFile, cert, 0o644)
}

// writeNew writes a file that must not exist yet (a CA is never
// overwritten by mistake).
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists: remove it first to make a new CA", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// replaceFile writes b to path through a temporary file in the same
// folder, renamed over path: path is never half written, and ends with mode
// whatever mode a file it replaces had.
func replaceFile(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
