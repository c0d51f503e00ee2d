package keys

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/keyfile"
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

// windowFlags registers --not-before and --not-after: the sealing window
// of a new key.
func windowFlags(fs *flag.FlagSet) (nb, na *timeFlag) {
	nb, na = new(timeFlag), new(timeFlag)
	fs.Var(nb, "not-before", "the key seals from `TIME` on (RFC 3339, e.g. 2026-12-01T00:00:00Z; none: no bound; default for a new key: at once)")
	fs.Var(na, "not-after", "the key stops sealing at `TIME` (RFC 3339; none: no bound) and opens until TIME plus the longest TTL (default for a new key: never)")
	return nb, na
}

// timeFlag is an RFC 3339 time flag; unset is the zero time.
type timeFlag struct {
	t   time.Time
	set bool // given on the command line ("none" sets it to the zero time)
}

func (f *timeFlag) String() string {
	if f == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	f.set = true
	if s == "none" {
		f.t = time.Time{}
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time (like 2026-12-01T00:00:00Z)", s)
	}
	f.t = t
	return nil
}

// KeygenCmd is mrtr keygen.
var KeygenCmd = &base.Command{Name: "keygen", Run: func(_ context.Context, a *base.App, args []string) error { return keygen(a, args) }}

// Cmd is mrtr keys.
var Cmd = &base.Command{Name: "keys", Run: func(_ context.Context, a *base.App, args []string) error { return keys(a, args) }}

// keygen runs mrtr keygen.
func keygen(a *base.App, args []string) error {
	fs := a.NewFlagSet("keygen", "mrtr keygen [--id ID] [--out FILE [--force]] [--not-before TIME] [--not-after TIME]")
	id := fs.String("id", "", "key id, [A-Za-z0-9_-]{1,32} (default: the current UTC time and 6 random hex digits)")
	out := fs.String("out", "", "write the key ring to FILE (mode 0600, refuses to overwrite) instead of stdout")
	force := fs.Bool("force", false, "with --out: replace an existing FILE (tokens sealed with its keys stop opening)")
	nb, na := windowFlags(fs)
	pos, err := a.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		fs.Usage()
		return base.ErrUsage
	}
	if *id == "" {
		if *id, err = defaultKeyID(); err != nil {
			return err
		}
	}
	k, err := reqstate.GenerateKey(*id, nil)
	if err != nil {
		return err
	}
	k.NotBefore, k.NotAfter = nb.t, na.t
	ring, err := reqstate.NewKeyRing(k)
	if err != nil {
		return err
	}
	data, err := ring.MarshalSecretJSON()
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if *out == "" {
		_, err = a.Stdout.Write(data)
		return err
	}
	if *force {
		if err := keyfile.Write(*out, ring); err != nil {
			return err
		}
		fmt.Fprintf(a.Stderr, "wrote key ring %s with key %s\n", *out, *id)
		return nil
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists, and keygen does not overwrite a key ring: to add a key and keep the others, "+
			"run mrtr keys rotate %s; to replace it (tokens sealed with its keys stop opening), add --force", *out, *out)
	}
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
	fmt.Fprintf(a.Stderr, "wrote key ring %s with key %s\n", *out, *id)
	return nil
}

const keysUsage = `Usage:
  mrtr keys check FILE
  mrtr keys status FILE [--max-age 90d] [--ttl 5m] [--at TIME]
  mrtr keys rotate FILE [--id ID] [--not-before TIME] [--not-after TIME]
  mrtr keys add FILE [--id ID] [--not-before TIME] [--not-after TIME]
  mrtr keys promote FILE ID
  mrtr keys remove FILE ID
  mrtr keys window FILE ID [--not-before TIME|none] [--not-after TIME|none]

The key that seals is the first key in file order whose window
(not_before <= now < not_after, either bound optional) is open; without
windows, the first key. Every key in the file opens tokens until its
not_after plus the longest TTL. Running servers reload the file when it
changes (or on SIGHUP): no restart.
`

// keys runs mrtr keys.
func keys(a *base.App, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(a.Stderr, keysUsage)
		return base.ErrUsage
	}
	if args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(a.Stdout, keysUsage) // help asked for: on stdout
		return nil
	}
	verb := args[0]
	if verb == "status" {
		return keysStatus(a, args[1:])
	}
	fs := a.NewFlagSet("keys "+verb, "mrtr keys "+verb+" FILE [ID] [--id ID] [--not-before TIME] [--not-after TIME]")
	id := fs.String("id", "", "id of the new key (rotate, add; default: the current UTC time and 6 random hex digits)")
	ttl := fs.Duration("ttl", mrtr.DefaultTTL, "remove: the servers' longest --ttl, to warn when the key removed may still have tokens out")
	nb, na := windowFlags(fs)
	pos, err := a.Parse(fs, args[1:])
	if err != nil {
		return err
	}
	want := map[string]int{"check": 1, "rotate": 1, "add": 1, "promote": 2, "remove": 2, "window": 2}
	n, ok := want[verb]
	if !ok {
		fmt.Fprintf(a.Stderr, "mrtr keys: unknown subcommand %q\n%s", verb, keysUsage)
		return base.ErrUsage
	}
	if len(pos) != n {
		fs.Usage()
		return base.ErrUsage
	}
	path := pos[0]
	ring, err := reqstate.LoadKeyRing(path)
	if err != nil {
		return keyfile.KeyFileHint(path, err)
	}
	if w := keyfile.KeyFileExposed(path); w != "" {
		fmt.Fprintln(a.Stderr, "warning: "+w)
	}
	keys := ring.Keys()
	if *id == "" {
		if *id, err = defaultKeyID(); err != nil {
			return err
		}
	}
	switch verb {
	case "check":
		sealing, _ := ring.SealingKey(time.Now())
		for _, k := range keys {
			role := "opens"
			if k.ID == sealing {
				role = "primary: seals and opens"
			}
			fmt.Fprintf(a.Stdout, "%s\t%s\n", k.ID, role)
		}
		return nil
	case "rotate", "add":
		k, err := reqstate.GenerateKey(*id, nil)
		if err != nil {
			return err
		}
		k.NotBefore, k.NotAfter = nb.t, na.t
		at := 0
		if verb == "add" {
			at = 1
		}
		keys = slices.Insert(keys, at, k)
	case "window":
		i := slices.IndexFunc(keys, func(k reqstate.Key) bool { return k.ID == pos[1] })
		if i < 0 {
			return fmt.Errorf("%s has no key %q", path, pos[1])
		}
		if !nb.set && !na.set {
			return fmt.Errorf("keys window: give --not-before and/or --not-after (a time, or none to clear it)")
		}
		if nb.set {
			keys[i].NotBefore = nb.t
		}
		if na.set {
			keys[i].NotAfter = na.t
		}
	case "promote", "remove":
		i := slices.IndexFunc(keys, func(k reqstate.Key) bool { return k.ID == pos[1] })
		if i < 0 {
			return fmt.Errorf("%s has no key %q", path, pos[1])
		}
		k := keys[i]
		if verb == "remove" {
			warnRecentSealer(a, path, ring, k.ID, *ttl)
		}
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
	if err := keyfile.Write(path, next); err != nil {
		return err
	}
	sealing, ok := next.SealingKey(time.Now())
	if !ok {
		sealing = "none: no key's window is open now, see mrtr keys status"
	}
	fmt.Fprintf(a.Stderr, "%s: keys now %v (sealing now: %s)\n", path, next.IDs(), sealing)
	return nil
}

// warnRecentSealer warns, before key id leaves the ring at path, when it
// may have sealed tokens that are still out: the file changed less than
// ttl ago and id is the key a promote or rotate leaves right after the
// one that seals now (the previous primary). Those tokens stop opening.
func warnRecentSealer(a *base.App, path string, ring *reqstate.KeyRing, id string, ttl time.Duration) {
	st, err := os.Stat(path)
	if err != nil || ttl <= 0 {
		return
	}
	age := time.Since(st.ModTime())
	if age >= ttl {
		return
	}
	sealing, _ := ring.SealingKey(time.Now())
	keys := ring.Keys()
	i := slices.IndexFunc(keys, func(k reqstate.Key) bool { return k.ID == sealing })
	if i < 0 || i+1 >= len(keys) || keys[i+1].ID != id {
		return
	}
	fmt.Fprintf(a.Stderr, "warning: %s changed %s ago, and %q is the key that sealed before %q: "+
		"tokens it sealed in the last %s (--ttl) stop opening now; to let them finish, remove it after %s\n",
		path, age.Round(time.Second), id, sealing, ttl, st.ModTime().Add(ttl).Format(time.RFC3339))
}
