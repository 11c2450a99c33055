package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// Signed checkpoints (docs/audit.md, "Signed checkpoints"): the leader of a
// cluster configured with an Ed25519 key signs the ledger's head every
// minute it moved, and appends the signature as an entry of kind
// KindCheckpoint, so an auditor holding the public key can tell that an
// export is the one the cluster wrote, not only that it is a chain.

// Signed is a head signed: the Seq and Hash of the entry signed, the
// Signature (lowercase hex Ed25519 signature of SignedMessage) and the
// KeyID of the key that made it.
type Signed struct {
	Seq       uint64 `json:"seq"`
	Hash      string `json:"hash"`
	Signature string `json:"signature"`
	KeyID     string `json:"key_id"`
}

// SignedMessage is the bytes a checkpoint's signature covers: the ASCII
// text "carmy-audit-checkpoint\n" followed by the canonical JSON
// {"hash":"…","seq":N} of the head.
func SignedMessage(h Head) []byte {
	return fmt.Appendf(nil, "carmy-audit-checkpoint\n{\"hash\":%q,\"seq\":%d}", h.Hash, h.Seq)
}

// KeyID names a public key: the lowercase hex of the first 8 bytes of the
// SHA-256 of its 32 raw bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Sign signs h with key.
func Sign(key ed25519.PrivateKey, h Head) Signed {
	pub, _ := key.Public().(ed25519.PublicKey)
	return Signed{Seq: h.Seq, Hash: h.Hash, Signature: hex.EncodeToString(ed25519.Sign(key, SignedMessage(h))), KeyID: KeyID(pub)}
}

// CheckSignature reports why s is not a signature of its head by pub: ""
// when it is.
func CheckSignature(pub ed25519.PublicKey, s Signed) string {
	if id := KeyID(pub); s.KeyID != id {
		return fmt.Sprintf("signed by key %s, not by the public key given (%s)", s.KeyID, id)
	}
	sig, err := hex.DecodeString(s.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "the signature is not 128 hex digits"
	}
	if !ed25519.Verify(pub, SignedMessage(Head{Seq: s.Seq, Hash: s.Hash}), sig) {
		return "the signature does not verify"
	}
	return ""
}

// ParsePrivateKey reads an Ed25519 private key from PEM: a "PRIVATE KEY"
// block in PKCS #8, as `carmy audit keygen` and `openssl genpkey
// -algorithm ed25519` write it.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("audit: not a PEM \"PRIVATE KEY\" block (PKCS #8)")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: the private key: %w", err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("audit: the private key is a %T, not Ed25519", k)
	}
	return key, nil
}

// ParsePublicKey reads an Ed25519 public key from PEM: a "PUBLIC KEY"
// block (PKIX), as `carmy audit keygen` and `openssl pkey -pubout` write it.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("audit: not a PEM \"PUBLIC KEY\" block")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("audit: the public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("audit: the public key is a %T, not Ed25519", k)
	}
	return pub, nil
}

// MarshalKeys returns the PEM of key (PKCS #8) and of its public key (PKIX).
func MarshalKeys(key ed25519.PrivateKey) (private, public []byte, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), nil
}
