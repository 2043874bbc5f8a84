package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRootFindsTheWorkspace(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "operators", "x", "internal", "controller", "x")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.25\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := repoRootFrom(deep)
	if err != nil || got != root {
		t.Errorf("repoRootFrom = %q, %v; want %q", got, err, root)
	}
	if _, err := repoRootFrom(t.TempDir()); err == nil {
		t.Error("a directory outside any workspace has a root")
	}
	if _, err := os.Stat(filepath.Join(RepoRoot(), "shared", "testenv", "harness.go")); err != nil {
		t.Errorf("RepoRoot %q is not this repository: %v", RepoRoot(), err)
	}
}
