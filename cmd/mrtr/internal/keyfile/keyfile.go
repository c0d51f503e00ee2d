package keyfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
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
