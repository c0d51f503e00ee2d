package audit

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
)

const auditUsage = `Usage:
  mrtr audit verify --pub FILE.pub [--node NAME] [--checkpoints LOG]... TRAIL...
  mrtr audit verify --keys RING [--continued] PATH...
  mrtr audit keygen --out FILE
  mrtr audit pubkey --keys RING [--kid KID]

verify --pub checks an audit trail written with --audit with the node's
public key alone, no secret: FILE.pub of its --audit-key, or what mrtr
audit pubkey prints for a node without one. Every line's link (prev) to
the line before; every checkpoint's signature under the key the one
before it certified (FILE.pub's for the first), its sequence, its count
of lines and chain head; times that never go back; and each checkpoint
that a log carried off the host (--checkpoints LOG, a JSON or text log
of mrtr serve or proxy, repeatable): the trail must hold it, the same.
Several TRAILs after logrotate are one chain, oldest first
(audit.jsonl.1 audit.jsonl). Several nodes' trails are grouped by the
node their checkpoints name and each node is checked on its own, one
report each; --node NAME checks that every trail is NAME's.
Exits 0 when every line is sealed up to the newest checkpoint the trail
or a log shows and the trail ends in a final checkpoint (a clean stop),
printing its sequence and time; 1 naming the first bad line and what is
wrong with it: altered, a line deleted, inserted or reordered (broken
link, count does not match), another node's trail or another key (bad
signature), a trail that ends before a checkpoint the log shows; 3 when
it holds but lines after its newest checkpoint are unsealed, lines were
abandoned by a restart record (a crash), or lines are torn (named; every
line after them was checked); 2 for usage.

verify --keys checks a trail written without checkpoints (before
--audit-key and the signed checkpoints): every line's MAC under the
ring key its kid names, and every line's link (prev) to the line before.
Several paths are one chain, oldest first (after logrotate: audit.jsonl.1
audit.jsonl). The first line must start a chain unless --continued (a
rotated file checked without the ones before it).
Exits 0 when every line holds, printing the last line's time and event,
else 1, naming the bad line: altered (its MAC fails), broken link (a
line deleted or inserted before it), truncated (the file ends inside a
line, or a torn line: a write cut short, after which every line is
checked too), unknown key (a kid the ring lacks). The ring's holder can
write a trail that verifies: give the auditor --pub instead.

keygen writes a new Ed25519 node key to FILE (mode 0600) and its public
key to FILE.pub, and prints the public key; it never overwrites either.
Give FILE to one node's --audit-key (a directory the node can write:
the key evolves), and FILE.pub to the auditor, off the node.

pubkey prints the public key of the key mrtr serve and proxy derive
from the ring's key KID (default: the primary) to sign checkpoints when
they run without --audit-key: pin it where the auditor keeps it.

`

// verbs are mrtr audit's subcommands, in the order the usage lists them.
var verbs = []string{"verify", "keygen", "pubkey"}

// flags are the flags of every subcommand.
type flags struct {
	sets map[string]*flag.FlagSet

	// verify
	pub, node, keys *string
	logs            []string
	continued       *bool
	// keygen
	out *string
	// pubkey
	ringKeys, kid *string
}

// newFlags registers the flags of every subcommand; each flag set prints
// the whole usage, every subcommand's flags, as mrtr audit --help does.
func newFlags(a *base.App) *flags {
	f := &flags{sets: map[string]*flag.FlagSet{}}
	for _, v := range verbs {
		f.sets[v] = a.NewFlagSet("audit "+v, "")
	}
	fs := f.sets["verify"]
	f.pub = fs.String("pub", "", "the node's public key `FILE.pub` (mrtr audit keygen; or mrtr audit pubkey's output in a file): check the signed checkpoints, no secret needed")
	f.node = fs.String("node", "", "the `NAME` every trail must be of (the --node it ran with); default: group the trails by the node their checkpoints name")
	fs.Func("checkpoints", "a `LOG` of mrtr serve or proxy (JSON or text) whose checkpoint records the trail must hold (repeatable)", func(v string) error {
		f.logs = append(f.logs, v)
		return nil
	})
	f.keys = fs.String("keys", "", "key ring `FILE` a trail written without checkpoints was written under (its MACs; the ring's holder could forge it)")
	f.continued = fs.Bool("continued", false, "accept any link on the first line (a rotated file checked alone; with --pub, its first checkpoint anchored by the --checkpoints log)")
	f.out = f.sets["keygen"].String("out", "", "write the node key to `FILE` (mode 0600) and its public key to FILE.pub; neither may exist")
	f.ringKeys = f.sets["pubkey"].String("keys", "", "key ring `FILE` the nodes run with (--keys)")
	f.kid = f.sets["pubkey"].String("kid", "", "the ring key `KID` the signing key derives from (default: the ring's primary, the one a node takes at start)")
	usage := func(fs *flag.FlagSet) func() {
		return func() {
			w := fs.Output()
			fmt.Fprint(w, auditUsage)
			for _, v := range verbs {
				fmt.Fprintf(w, "Flags of %s:\n", v)
				out := f.sets[v].Output()
				f.sets[v].SetOutput(w)
				base.PrintDefaults(f.sets[v])
				f.sets[v].SetOutput(out)
			}
		}
	}
	for _, fs := range f.sets {
		fs.Usage = usage(fs)
	}
	return f
}

// Cmd is mrtr audit.
var Cmd = &base.Command{Name: "audit", Run: func(_ context.Context, a *base.App, args []string) error { return audit(a, args) }}

// audit runs `mrtr audit VERB`.
func audit(a *base.App, args []string) error {
	f := newFlags(a)
	help := func(w io.Writer) {
		fs := f.sets["verify"]
		fs.SetOutput(w)
		fs.Usage()
	}
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
		help(a.Stdout) // help asked for: on stdout, as mrtr audit verify --help
		return nil
	}
	if len(args) == 0 {
		help(a.Stderr)
		return base.ErrUsage
	}
	switch args[0] {
	case "verify":
		return verify(a, f, args[1:])
	case "keygen":
		return keygen(a, f, args[1:])
	case "pubkey":
		return pubkey(a, f, args[1:])
	}
	fmt.Fprintf(a.Stderr, "mrtr audit: unknown subcommand %q (%s)\n", args[0], strings.Join(verbs, ", "))
	help(a.Stderr)
	return base.ErrUsage
}
