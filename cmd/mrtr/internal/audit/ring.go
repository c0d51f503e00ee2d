package audit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	mrtraudit "github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/keyfile"
	"github.com/mrtr-go/mrtr/internal/termtext"
	"github.com/mrtr-go/mrtr/reqstate"
)

// verifyRing runs mrtr audit verify --keys RING: the MACs and links of
// a trail, with the ring (a trail written before checkpoints).
func verifyRing(a *base.App, keys string, continued *bool, paths []string) error {
	ring, err := reqstate.LoadKeyRing(keys)
	if err != nil {
		return keyfile.KeyFileHint(keys, err)
	}
	opts := &mrtraudit.VerifyOptions{Continued: *continued}
	total := 0
	var torn []string
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		res, err := mrtraudit.Verify(f, ring, opts)
		f.Close()
		var le *mrtraudit.LineError
		switch {
		case errors.As(err, &le) && le.Problem == mrtraudit.ProblemTruncated && slices.Contains(res.Torn, le.Line):
			// Only torn lines: every other line holds, the chain goes on.
			verb := "hold"
			if res.Lines == 1 {
				verb = "holds"
			}
			fmt.Fprintf(a.Stdout, "%s: %s %s; %s\n", p, base.Plural(res.Lines, "line"), verb, tornWords(res))
			torn = append(torn, fmt.Sprintf("%s line %s", p, lineList(res.Torn)))
		case le != nil:
			return fmt.Errorf("%s: %w (%s before it%s)%s", p, err, base.Plural(res.Lines, "good line"), tornBefore(res.Torn), linkHint(le, paths, i, *continued))
		case err != nil:
			return fmt.Errorf("read %s: %w", p, err)
		default:
			last := ""
			if res.Lines > 0 {
				last = fmt.Sprintf("; the last line: %s at %s", termtext.Line(res.LastEvent), res.LastTime.UTC().Format(time.RFC3339Nano))
			}
			fmt.Fprintf(a.Stdout, "%s: %s, every MAC and link holds%s\n", p, base.Plural(res.Lines, "line"), last)
		}
		total += res.Lines
		opts = &mrtraudit.VerifyOptions{After: res.Last}
	}
	if len(paths) > 1 {
		fmt.Fprintf(a.Stdout, "%s in %d files, one chain\n", base.Plural(total, "line"), len(paths))
	}
	if len(torn) > 0 {
		return fmt.Errorf("torn lines: %s", strings.Join(torn, "; "))
	}
	return nil
}

// tornWords says what the torn lines of a trail are.
func tornWords(res mrtraudit.Result) string {
	mid := res.Torn
	var cut string
	if res.Cut {
		mid = mid[:len(mid)-1]
		cut = fmt.Sprintf("line %d: truncated (the file ends inside it: a crash mid-write, or lines cut off)", res.Torn[len(res.Torn)-1])
	}
	if len(mid) == 0 {
		return cut
	}
	s := fmt.Sprintf("line %s: truncated (torn: a write cut short by a crash or a failed write, ended by the next line; every line after it was checked)", lineList(mid))
	if cut != "" {
		s += "; " + cut
	}
	return s
}

// lineList is "4", "4, 9".
func lineList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// tornBefore names the torn lines before a bad one.
func tornBefore(torn []int) string {
	if len(torn) == 0 {
		return ""
	}
	return "; torn before it: line " + lineList(torn)
}

// linkHint explains a broken link on the first line of a file: what to
// check instead when it is a file logrotate moved or the live file after
// a rotation.
func linkHint(le *mrtraudit.LineError, paths []string, i int, continued bool) string {
	if le.Problem != mrtraudit.ProblemBrokenLink || le.Line != 1 || continued {
		return ""
	}
	if i > 0 {
		return fmt.Sprintf(": it does not go on from the end of %s; give the files oldest first, each after the one logrotate moved before it", paths[i-1])
	}
	return fmt.Sprintf(": its first line does not start a chain; if logrotate moved the file before it, check the two as one chain, oldest first (mrtr audit verify --keys RING %s.1 %s), or this one alone with --continued", paths[i], paths[i])
}
