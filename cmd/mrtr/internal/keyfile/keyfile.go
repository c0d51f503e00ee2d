package keyfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/mrtr-go/mrtr/reqstate"
)

// KeyFileHint adds to err, an error reading key file path, what to do
// when the file does not exist.
func KeyFileHint(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w; create one with: mrtr keygen --out %s", err, path)
	}
	return err
}

// KeyFileExposed is a warning when the key file at path may be read by
// its group or by others (as ssh warns of a private key), or "".
func KeyFileExposed(path string) string {
	if runtime.GOOS == "windows" {
		return "" // no Unix permission bits
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("key file %s is accessible by its group or others (mode %04o): anyone who reads it can forge and read every requestState; run chmod 600 %s",
		path, st.Mode().Perm(), path)
}

// Write writes ring to path: it replaces the file atomically, keeping it
// private (mode 0600).
func Write(path string, ring *reqstate.KeyRing) error {
	data, err := ring.MarshalSecretJSON()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mrtr-keys-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
