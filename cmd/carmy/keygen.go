package main

import (
	"encoding/base64"
	"fmt"
	"io"
)

// keygenUsage is what `carmy keygen --help` prints.
const keygenUsage = `Usage: carmy keygen

Prints a new random key: 32 bytes from the system's random source, in
standard base64. Use it for --gossip-key, --cluster-key or an API token.
`

// keygenBytes is the size of the keys `carmy keygen` makes: AES-256.
const keygenBytes = 32

// keygen prints a new random key for --gossip-key, base64-encoded, read
// from random (crypto/rand in the binary).
func keygen(args []string, random io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
		_, err := fmt.Fprint(stdout, keygenUsage)
		return err
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "carmy keygen: unexpected argument %q\n\n%s", args[0], keygenUsage)
		return errUsage
	}
	key, err := newKey(random)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	_, err = fmt.Fprintln(stdout, key)
	return err
}

// newKey returns keygenBytes random bytes from random in standard base64:
// a gossip key, a cluster key or a token.
func newKey(random io.Reader) (string, error) {
	key := make([]byte, keygenBytes)
	if _, err := io.ReadFull(random, key); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return base64.StdEncoding.EncodeToString(key), nil
}
