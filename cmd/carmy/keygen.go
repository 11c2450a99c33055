package main

import (
	"encoding/base64"
	"fmt"
	"io"
)

// keygenBytes is the size of the keys `carmy keygen` makes: AES-256.
const keygenBytes = 32

// keygen prints a new random key for --gossip-key, base64-encoded, read
// from random (crypto/rand in the binary).
func keygen(args []string, random io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "carmy keygen: unexpected argument %q\n\nUsage: carmy keygen\n", args[0])
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
