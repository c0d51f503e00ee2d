package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	mrtraudit "github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/keyfile"
	"github.com/mrtr-go/mrtr/reqstate"
)

// parseFlagsOnly parses the flags of a subcommand that takes no
// argument, one of them (need, whose value is p) required.
func parseFlagsOnly(a *base.App, f *flags, verb string, args []string, need string, p *string) error {
	pos, err := a.Parse(f.sets[verb], args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 0:
		return base.Explain(a.Stderr, &base.UsageError{Cmd: "audit " + verb, Msg: fmt.Sprintf("unexpected %q: give %s", pos[0], need)})
	case *p == "":
		return base.Explain(a.Stderr, &base.UsageError{Cmd: "audit " + verb, Msg: need + " is missing"})
	}
	return nil
}

// keygen runs mrtr audit keygen --out FILE.
func keygen(a *base.App, f *flags, args []string) error {
	out := f.out
	if err := parseFlagsOnly(a, f, "keygen", args, "--out FILE (the key file to write)", out); err != nil {
		return err
	}
	for _, p := range []string{*out, *out + ".pub"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s exists: mrtr audit keygen never overwrites a key or a public key (the trail it signs would no longer verify with the one pinned)", p)
		}
	}
	pub, err := mrtraudit.GenerateKeyFile(*out, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.Stderr, "wrote audit key %s (mode 0600) and its public key %s.pub: give %s to one node's --audit-key, and pin %s.pub off the node\n", *out, *out, *out, *out)
	fmt.Fprintf(a.Stdout, "%s.pub: %s\n", *out, pub)
	return nil
}

// pubkey runs mrtr audit pubkey --keys RING [--kid KID].
func pubkey(a *base.App, f *flags, args []string) error {
	keys, kid := f.ringKeys, f.kid
	if err := parseFlagsOnly(a, f, "pubkey", args, "--keys RING (the key ring the nodes run with)", keys); err != nil {
		return err
	}
	ring, err := reqstate.LoadKeyRing(*keys)
	if err != nil {
		return keyfile.KeyFileHint(*keys, err)
	}
	pub, err := mrtraudit.RingPublicKey(ring, *kid)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.Stdout, pub)
	return nil
}
