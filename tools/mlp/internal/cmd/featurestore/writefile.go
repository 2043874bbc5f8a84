package featurestore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// writePrivate writes credentials to path with mode 0600 from the first
// byte on. Only a regular file or a symbolic link is ever replaced, and the
// link itself, never what it points to: a device, FIFO, socket or
// directory named by mistake (--file /dev/null) is refused, not replaced.
// A new file is created exclusively; a replaced one (--force) is written to
// a private temporary file in the same directory and renamed over it, so
// readers see the old or the new content, never a part.
func writePrivate(path string, data []byte, force bool) error {
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return createExclusive(path, data)
	case err != nil:
		return err
	case !replaceable(info.Mode()):
		return fmt.Errorf("%s is %s, not a regular file: choose a file with --file", path, describeMode(info.Mode()))
	case !force:
		return fmt.Errorf("%s exists: use --force to replace it, or --file for another name", path)
	}
	tmp, err := createTemp(filepath.Dir(path), filepath.Base(path), data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func replaceable(m fs.FileMode) bool {
	return m.IsRegular() || m&fs.ModeSymlink != 0
}

func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// createExclusive creates path, failing if anything (a dangling symbolic
// link included) is there already, and removes a partly written file.
func createExclusive(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: use --force to replace it, or --file for another name", path)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// createTemp writes data to a new hidden file next to the target and
// returns its name. O_EXCL|O_NOFOLLOW: a link planted under the random name
// is never followed.
func createTemp(dir, base string, data []byte) (string, error) {
	for range 10 {
		suffix := make([]byte, 8)
		if _, err := rand.Read(suffix); err != nil {
			return "", err
		}
		name := filepath.Join(dir, "."+base+"."+hex.EncodeToString(suffix))
		err := createExclusive(name, data)
		if err == nil {
			return name, nil
		}
		if _, statErr := os.Lstat(name); statErr == nil {
			continue // The name was taken: draw another.
		}
		return "", err
	}
	return "", fmt.Errorf("could not create a temporary file in %s", dir)
}
