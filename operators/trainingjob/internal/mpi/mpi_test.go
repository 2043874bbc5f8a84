package mpi

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestSSHTriesARefusedConnectionAgain runs the SSH client with the
// entrypoint's configuration against a port on loopback that refuses
// until the client has been refused once: mpirun's one connection to a
// worker must outlast a refusal of a moment.
func TestSSHTriesARefusedConnectionAgain(t *testing.T) {
	client, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("no ssh client on this machine")
	}
	_, rest, ok := strings.Cut(script, "cat >\"$d/ssh_config\" <<EOF\n")
	config, _, ok2 := strings.Cut(rest, "\nEOF\n")
	if !ok || !ok2 {
		t.Fatal("the entrypoint writes no ssh_config")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(config, "$d", dir)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on: the client's connections are refused.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	if err := probe.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// -v prints each refused attempt; the port in the configuration (the
	// workers') gives way to the test's.
	cmd := exec.CommandContext(ctx, client, "-v", "-F", cfg, "-o", "Port="+port, "127.0.0.1", "true")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	output := bufio.NewScanner(stderr)
	var lines []string
	for !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "Connection refused") }) {
		if !output.Scan() {
			_ = cmd.Wait()
			t.Fatalf("ssh ended before it was refused:\n%s", strings.Join(lines, "\n"))
		}
		lines = append(lines, output.Text())
	}

	// Refused once: the server comes up, and one of the client's next
	// attempts must reach it.
	server, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	defer server.Close()
	accepted := make(chan error, 1)
	go func() {
		conn, err := server.Accept()
		if err == nil {
			err = conn.Close()
		}
		accepted <- err
	}()
	ended := make(chan error, 1)
	go func() {
		// The test's server speaks no SSH: the client ends either way.
		for output.Scan() {
			lines = append(lines, output.Text())
		}
		ended <- cmd.Wait()
	}()
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatal(err)
		}
		if err := <-ended; err == nil {
			t.Error("ssh succeeded against a server that speaks no SSH")
		}
	case err := <-ended:
		t.Fatalf("ssh gave up after a refused connection (%v):\n%s", err, strings.Join(lines, "\n"))
	}
}
