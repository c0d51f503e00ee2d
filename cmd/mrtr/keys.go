package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// defaultKeyID names a new key after the moment it was made, plus six
// random characters: ids made within the same second (keygen then keys
// add, in a script) must not repeat. 2026-11-30-150405-a1b2c3 is 24 of
// the 32 characters an id may have.
func defaultKeyID() (string, error) {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("key id: %w", err)
	}
	return time.Now().UTC().Format("2006-01-02-150405") + "-" + hex.EncodeToString(b[:]), nil
}

func (a *app) keygen(args []string) error {
	fs := a.newFlagSet("keygen", "mrtr keygen [--id ID] [--out FILE]")
	id := fs.String("id", "", "key id, [A-Za-z0-9_-]{1,32} (default: the current UTC time and 6 random hex digits)")
	out := fs.String("out", "", "write the key ring to FILE (mode 0600, refuses to overwrite) instead of stdout")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		fs.Usage()
		return errUsage
	}
	if *id == "" {
		if *id, err = defaultKeyID(); err != nil {
			return err
		}
	}
	ring, err := reqstate.GenerateKeyRing(*id, nil)
	if err != nil {
		return err
	}
	data, err := ring.MarshalSecretJSON()
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if *out == "" {
		_, err = a.stdout.Write(data)
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "wrote key ring %s with key %s\n", *out, *id)
	return nil
}

const keysUsage = `Usage:
  mrtr keys check FILE
  mrtr keys rotate FILE [--id ID]
  mrtr keys add FILE [--id ID]
  mrtr keys promote FILE ID
  mrtr keys remove FILE ID
`

func (a *app) keys(args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(a.stderr, keysUsage)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	verb := args[0]
	fs := a.newFlagSet("keys "+verb, "mrtr keys "+verb+" FILE [ID] [--id ID]")
	id := fs.String("id", "", "id of the new key (rotate, add; default: the current UTC time and 6 random hex digits)")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	want := map[string]int{"check": 1, "rotate": 1, "add": 1, "promote": 2, "remove": 2}
	n, ok := want[verb]
	if !ok {
		fmt.Fprintf(a.stderr, "mrtr keys: unknown subcommand %q\n%s", verb, keysUsage)
		return errUsage
	}
	if len(pos) != n {
		fs.Usage()
		return errUsage
	}
	path := pos[0]
	ring, err := reqstate.LoadKeyRing(path)
	if err != nil {
		return err
	}
	keys := ring.Keys()
	if *id == "" {
		if *id, err = defaultKeyID(); err != nil {
			return err
		}
	}
	switch verb {
	case "check":
		for i, k := range keys {
			role := "opens"
			if i == 0 {
				role = "primary: seals and opens"
			}
			fmt.Fprintf(a.stdout, "%s\t%s\n", k.ID, role)
		}
		return nil
	case "rotate", "add":
		k, err := reqstate.GenerateKey(*id, nil)
		if err != nil {
			return err
		}
		at := 0
		if verb == "add" {
			at = 1
		}
		keys = slices.Insert(keys, at, k)
	case "promote", "remove":
		i := slices.IndexFunc(keys, func(k reqstate.Key) bool { return k.ID == pos[1] })
		if i < 0 {
			return fmt.Errorf("%s has no key %q", path, pos[1])
		}
		k := keys[i]
		keys = slices.Delete(keys, i, i+1)
		if verb == "promote" {
			keys = slices.Insert(keys, 0, k)
		} else if len(keys) == 0 {
			return fmt.Errorf("refusing to remove %q, the only key of %s", k.ID, path)
		}
	}
	next, err := reqstate.NewKeyRing(keys...)
	if err != nil {
		return err
	}
	if err := writeKeyRing(path, next); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "%s: keys now %v (primary %s)\n", path, next.IDs(), next.Primary())
	return nil
}

// writeKeyRing replaces path atomically, keeping it private.
func writeKeyRing(path string, ring *reqstate.KeyRing) error {
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
