package mpi

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
)

func TestNewKeyPairIsOneUsableEd25519Pair(t *testing.T) {
	data, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(data[KeyPrivate])
	if err != nil {
		t.Fatalf("private key is not in a format ssh reads: %v", err)
	}
	pub, _, _, rest, err := ssh.ParseAuthorizedKey(data[KeyPublic])
	if err != nil || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("public key is not one authorized_keys line: %v (rest %q)", err, rest)
	}
	if pub.Type() != ssh.KeyAlgoED25519 || !bytes.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		t.Errorf("public key %s does not belong to the private key", pub.Type())
	}
	// A signature by the private key verifies with the public key.
	sig, err := signer.Sign(nil, []byte("challenge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Verify([]byte("challenge"), sig); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
	other, err := NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(other[KeyPrivate], data[KeyPrivate]) {
		t.Error("two key pairs are equal: keys are not random")
	}
}

func TestHostfileListsTheLauncherFirstAndEveryHostWithItsSlots(t *testing.T) {
	got := Hostfile([]string{"a-1.a.ns.svc", "a-2.a.ns.svc"}, 4)
	want := "localhost slots=4\na-1.a.ns.svc slots=4\na-2.a.ns.svc slots=4\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}
	if got := Hostfile(nil, 1); got != "localhost slots=1\n" {
		t.Errorf("single pod hostfile %q", got)
	}
}

func TestApplyRunsTheUserCommandThroughTheEntrypoint(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: ContainerName, Command: []string{"mpirun", "python3"}, Args: []string{"train.py"}}}}
	Apply(spec, "job-mpi-ssh", RoleLauncher, "localhost slots=1\n")
	c := spec.Containers[0]
	if diff := cmp.Diff([]string{"/bin/sh", "-c", script, "mlplatform-mpi"}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mpirun", "python3", "train.py"}, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env[EnvRole] != RoleLauncher || env[EnvHostfile] != "localhost slots=1\n" {
		t.Errorf("env %v", env)
	}
	var secret *corev1.SecretVolumeSource
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret
		}
	}
	if secret == nil || secret.SecretName != "job-mpi-ssh" || *secret.DefaultMode&0o007 != 0 {
		t.Errorf("key volume %+v: want the Secret, unreadable by others", secret)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	// The entrypoint reads the paths the volumes are mounted at.
	for _, path := range []string{KeysPath, RunPath} {
		if mounts[path] == "" || !strings.Contains(script, path) {
			t.Errorf("path %s: mounted as %q, in the entrypoint %t", path, mounts[path], strings.Contains(script, path))
		}
	}
	if !strings.Contains(script, "Port 2222") || Port != 2222 {
		t.Error("the entrypoint's SSH port is not Port")
	}
}
