package mpi

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// The keys of the SSH Secret. The one key pair authenticates the launcher
// to the workers and the workers to the launcher (it is also every SSH
// server's host key), so the launcher checks host keys strictly without a
// per-pod known_hosts entry.
const (
	KeyPrivate = "id_ed25519"
	KeyPublic  = "id_ed25519.pub"
)

// SecretName is the Secret that holds a TrainingJob's SSH key pair.
func SecretName(trainingJob string) string { return trainingJob + "-mpi-ssh" }

// NewKeyPair generates an Ed25519 key pair: the private key in OpenSSH's
// format and the public key as an authorized_keys line, as sshd and ssh
// read them.
func NewKeyPair() (map[string][]byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the MPI SSH key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, fmt.Errorf("encoding the MPI SSH key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encoding the MPI SSH public key: %w", err)
	}
	return map[string][]byte{
		KeyPrivate: pem.EncodeToMemory(block),
		KeyPublic:  ssh.MarshalAuthorizedKey(sshPub),
	}, nil
}
