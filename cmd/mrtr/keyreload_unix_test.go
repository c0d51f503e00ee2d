//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSIGHUPReloadsKeyRing sends a real SIGHUP to this process while
// `mrtr serve` runs in it: with polling out of the way (--keys-poll 1h),
// the signal alone reloads the key file, and the new primary seals. A
// second SIGHUP with the file unchanged keeps the ring and says so.
func TestSIGHUPReloadsKeyRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	a, b := genKey(t, "key-a"), genKey(t, "key-b")
	writeRing(t, path, a)
	url, logs := startServe(t, "--keys", path, "--keys-poll", "1h")
	waitLog(t, logs, 0, "mrtr key ring reloads on change or SIGHUP", map[string]string{"file": path})
	c := mcpClient{t, url}
	inFlight, _ := c.pause()

	mark := len(logs.String())
	writeRing(t, path, b, a)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, logs, mark, "mrtr key ring reloaded", map[string]string{"trigger": "SIGHUP", "primary": "key-b"})
	if _, kid := c.pause(); kid != "key-b" {
		t.Fatalf("sealed under %q after SIGHUP", kid)
	}
	c.complete(inFlight)

	mark = len(logs.String())
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	waitLog(t, logs, mark, "mrtr key ring unchanged", map[string]string{"trigger": "SIGHUP"})
}
