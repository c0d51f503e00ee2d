package keys

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/keyfile"
	"github.com/mrtr-go/mrtr/reqstate"
)

// defaultMaxKeyAge is when `mrtr keys status` calls a primary old.
const defaultMaxKeyAge = 90 * 24 * time.Hour

// The roles of a key at an instant, as `mrtr keys status` prints them.
const (
	rolePrimary  = "primary"       // seals (and opens)
	roleOpening  = "opening-only"  // opens; another key seals, or its window has ended
	rolePending  = "not-yet-valid" // opens; seals from its not_before
	roleRetired  = "retired"       // past not_after + TTL + leeway: opens nothing
	noWindowText = "-"
)

// dayDuration is a duration flag that also takes days: 90d, 1.5d, or any
// Go duration (2160h).
type dayDuration struct{ d time.Duration }

func (f *dayDuration) String() string {
	if f == nil {
		return ""
	}
	if f.d%(24*time.Hour) == 0 && f.d > 0 {
		return strconv.FormatInt(int64(f.d/(24*time.Hour)), 10) + "d"
	}
	return f.d.String()
}

func (f *dayDuration) Set(s string) error {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil || days <= 0 || days > 100000 {
			return fmt.Errorf("%q is not a positive number of days (like 90d)", s)
		}
		d = time.Duration(days * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration (like 90d or 2160h)", s)
		}
	}
	f.d = d
	return nil
}

// keyStart is when a key's age is counted from: its not_before when set
// (the start of its sealing), otherwise the date its id begins with
// (mrtr keygen's ids, 2026-11-30-150405-a1b2c3, and the docs' 2026-11 or
// 2026-11-30, read as UTC). ok is false when neither is known.
func keyStart(k reqstate.Key) (t time.Time, from string, ok bool) {
	if !k.NotBefore.IsZero() {
		return k.NotBefore, "not_before", true
	}
	for _, layout := range []string{"2006-01-02-150405", "2006-01-02", "2006-01"} {
		if len(k.ID) < len(layout) {
			continue
		}
		if rest := k.ID[len(layout):]; rest != "" && rest[0] != '-' && rest[0] != '_' {
			continue
		}
		if t, err := time.Parse(layout, k.ID[:len(layout)]); err == nil {
			return t, "id", true
		}
	}
	return time.Time{}, "", false
}

// keyRole is the role of k at now, given that sealing is the id of the
// key that seals then, and grace how long a key opens past its not_after.
func keyRole(k reqstate.Key, sealing string, now time.Time, grace time.Duration) string {
	switch {
	case k.ID == sealing:
		return rolePrimary
	case !k.OpensAt(now, grace):
		return roleRetired
	case !k.NotBefore.IsZero() && now.Before(k.NotBefore):
		return rolePending
	}
	return roleOpening
}

// shortAge writes d in the largest whole unit: 120d, 5h, 12m, 30s.
func shortAge(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d >= time.Hour:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d >= time.Minute:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

func windowText(t time.Time) string {
	if t.IsZero() {
		return noWindowText
	}
	return t.UTC().Format(time.RFC3339)
}

var errNoSealer = errors.New("no key can seal now")

// keysStatus prints each key's role, window and age at --at (default
// now), and warns when the primary is older than --max-age, when it
// stops sealing with no successor, and about retired keys. It fails when
// no key can seal.
func keysStatus(a *base.App, args []string) error {
	fs := a.NewFlagSet("keys status", "mrtr keys status FILE [--max-age 90d] [--ttl 5m] [--at TIME]")
	maxAge := &dayDuration{defaultMaxKeyAge}
	fs.Var(maxAge, "max-age", "warn when the primary is older than `AGE` (days like 90d, or a Go duration)")
	ttl := fs.Duration("ttl", mrtr.DefaultTTL, "the longest --ttl of the servers using FILE: a key opens until its not_after plus this and the leeway")
	at := new(timeFlag)
	fs.Var(at, "at", "show the key ring as it stands at `TIME` (RFC 3339; default: now), e.g. to check a planned rotation")
	pos, err := a.Parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
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
	now := at.t
	if now.IsZero() {
		now = time.Now()
	}
	grace := *ttl + mrtr.DefaultLeeway
	sealing, canSeal := ring.SealingKey(now)

	fmt.Fprintf(a.Stdout, "%s at %s: the first key in file order whose window is open seals\n\n", path, now.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tNOT_BEFORE\tNOT_AFTER\tAGE")
	var warnings []string
	for _, k := range ring.Keys() {
		role := keyRole(k, sealing, now, grace)
		age := "?"
		start, from, ok := keyStart(k)
		switch {
		case ok && now.Before(start):
			age = "in " + shortAge(start.Sub(now))
		case ok:
			age = shortAge(now.Sub(start))
			if from == "id" {
				age += " (id)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, role, windowText(k.NotBefore), windowText(k.NotAfter), age)

		switch role {
		case rolePrimary:
			if !ok {
				warnings = append(warnings, fmt.Sprintf("warning: the age of primary %s is unknown (no not_before, no date in its id); give keys dated ids or a not_before", k.ID))
			} else if d := now.Sub(start); d > maxAge.d {
				warnings = append(warnings, fmt.Sprintf("warning: primary %s is %s old, more than --max-age %s: rotate it (mrtr keys add %s, then, once every node has it, mrtr keys promote %s ID)",
					k.ID, shortAge(d), maxAge, path, path))
			}
			if !k.NotAfter.IsZero() {
				if next, ok := ring.SealingKey(k.NotAfter); !ok {
					warnings = append(warnings, fmt.Sprintf("warning: primary %s stops sealing at %s and no other key's window is open then: sealing will fail; add a key with --not-before %s",
						k.ID, windowText(k.NotAfter), windowText(k.NotAfter)))
				} else {
					warnings = append(warnings, fmt.Sprintf("note: at %s %s takes over from %s", windowText(k.NotAfter), next, k.ID))
				}
			}
		case roleRetired:
			warnings = append(warnings, fmt.Sprintf("note: %s opens nothing since %s: remove it (mrtr keys remove %s %s)",
				k.ID, windowText(k.NotAfter.Add(grace)), path, k.ID))
		}
	}
	tw.Flush()
	if len(warnings) > 0 {
		fmt.Fprintln(a.Stdout)
		for _, w := range warnings {
			fmt.Fprintln(a.Stdout, w)
		}
	}
	if !canSeal {
		return fmt.Errorf("%s: %w at %s: every key's window is closed; servers refuse to start with it and refuse it on reload", path, errNoSealer, now.UTC().Format(time.RFC3339))
	}
	return nil
}
