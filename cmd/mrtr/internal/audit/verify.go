package audit

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	mrtraudit "github.com/mrtr-go/mrtr/audit"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/base"
	"github.com/mrtr-go/mrtr/internal/termtext"
)

// verify runs mrtr audit verify: with --pub the sealed check, with
// --keys the round-one one.
func verify(a *base.App, f *flags, args []string) error {
	pub, node, keys, continued := f.pub, f.node, f.keys, f.continued
	paths, err := a.Parse(f.sets["verify"], args)
	if err != nil {
		return err
	}
	switch {
	case *pub == "" && *keys == "":
		return base.Explain(a.Stderr, &base.UsageError{Cmd: "audit verify", Msg: "--pub FILE.pub (or --keys RING is missing: the key ring the trail was written under, for a trail without checkpoints)"})
	case *pub != "" && *keys != "":
		return base.Explain(a.Stderr, &base.UsageError{Cmd: "audit verify", Msg: "--pub and --keys: give one (--pub for a trail with checkpoints, --keys for one without)"})
	case *keys != "" && (*node != "" || len(f.logs) > 0):
		return base.Explain(a.Stderr, &base.UsageError{Cmd: "audit verify", Msg: "--node and --checkpoints check checkpoints: they go with --pub, not --keys"})
	case len(paths) == 0:
		return base.Explain(a.Stderr, &base.UsageError{Cmd: "audit verify", Msg: "no PATH: give the trail to check (several: one chain, oldest first)"})
	}
	if *keys != "" {
		return verifyRing(a, *keys, continued, paths)
	}
	return verifySealed(a, *pub, *node, f.logs, *continued, paths)
}

// exitStatus is mrtr audit verify --pub's outcome once reported: 1 or 3.
type exitStatus int

func (e exitStatus) Error() string {
	if e == 1 {
		return "the trail does not verify"
	}
	return "the trail holds, but not sealed to its end"
}

func (e exitStatus) ExitStatus() int { return int(e) }

// group is the files of one node's trail, oldest first.
type group struct {
	node  string
	paths []string
}

// verifySealed runs mrtr audit verify --pub.
func verifySealed(a *base.App, pubPath, node string, logs []string, continued bool, paths []string) error {
	pub, err := mrtraudit.ReadPublicKey(pubPath)
	if err != nil {
		return err
	}
	var cps []mrtraudit.Checkpoint
	for _, p := range logs {
		c, err := readLogCheckpoints(p)
		if err != nil {
			return err
		}
		cps = append(cps, c...)
	}
	groups, err := groupByNode(paths, node)
	if err != nil {
		return err
	}
	worst := 0
	for _, g := range groups {
		res, err := verifyGroup(pub, g, &mrtraudit.SealOptions{Node: g.node, Checkpoints: cps, Continued: continued})
		if err != nil {
			return err
		}
		fmt.Fprintln(a.Stdout, report(g, res, len(logs) > 0))
		if c := res.Verdict.ExitCode(); c == 1 || (c == 3 && worst == 0) {
			worst = c
		}
	}
	if len(groups) > 1 {
		fmt.Fprintf(a.Stdout, "%d nodes\n", len(groups))
	}
	if worst != 0 {
		return exitStatus(worst)
	}
	return nil
}

// groupByNode groups the trails by the node of their first checkpoint,
// keeping their order (oldest first within a node); a file without a
// checkpoint goes with the file before it. With node, every file is
// one trail of that node.
func groupByNode(paths []string, node string) ([]group, error) {
	if node != "" {
		return []group{{node: node, paths: paths}}, nil
	}
	var gs []group
	at := map[string]int{}
	last := -1
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		n, err := mrtraudit.TrailNode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		i, ok := at[n]
		switch {
		case n == "" && last >= 0:
			i = last
		case !ok:
			i = len(gs)
			at[n] = i
			gs = append(gs, group{node: n})
		}
		gs[i].paths = append(gs[i].paths, p)
		last = i
	}
	return gs, nil
}

// verifyGroup checks one node's files as one chain.
func verifyGroup(pub mrtraudit.PublicKey, g group, opts *mrtraudit.SealOptions) (mrtraudit.SealResult, error) {
	var rs []io.Reader
	for _, p := range g.paths {
		f, err := os.Open(p)
		if err != nil {
			return mrtraudit.SealResult{}, err
		}
		defer f.Close()
		rs = append(rs, f)
	}
	res, err := mrtraudit.VerifySealed(pub, rs, opts)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", strings.Join(g.paths, ", "), err)
	}
	return res, nil
}

// report is one node's outcome in one line.
func report(g group, res mrtraudit.SealResult, logs bool) string {
	node := res.Node
	if node == "" {
		node = g.node
	}
	head := fmt.Sprintf("node %s: ", termtext.Line(node))
	if node == "" {
		head = "a trail without checkpoints: "
	}
	files := ""
	if len(g.paths) > 1 {
		files = fmt.Sprintf(" in %d files", len(g.paths))
	}
	lines := base.Plural(int64(res.Lines), "line") + files
	var extra []string
	if logs {
		extra = append(extra, fmt.Sprintf("the log's checkpoints: %d matched", res.LogMatched))
		if res.LogIgnored > 0 {
			extra = append(extra, fmt.Sprintf("%d not validly signed, ignored", res.LogIgnored))
		}
	}
	if res.FirstEpoch > 0 {
		extra = append(extra, fmt.Sprintf("begun with the key of epoch %d, certified from FILE.pub's", res.FirstEpoch))
	}
	tail := ""
	if len(extra) > 0 {
		tail = " (" + strings.Join(extra, "; ") + ")"
	}
	switch res.Verdict {
	case mrtraudit.VerdictOK:
		return fmt.Sprintf("%s%s sealed; the final checkpoint: %d at %s%s", head, lines, res.Last.Seq, res.Last.Time.UTC().Format(time.RFC3339Nano), tail)
	case mrtraudit.VerdictBroken:
		e := res.Err
		where := "after the last line"
		if e.Pos.File < len(g.paths) {
			where = g.paths[e.Pos.File]
		}
		s := fmt.Sprintf("%s%s: line %d: %s", head, where, e.Pos.Line, e.Problem)
		if e.Detail != "" {
			s += ": " + termtext.Line(e.Detail)
		}
		return s + fmt.Sprintf(" (line %d of the chain%s)", e.Line, tornBeforeSealed(g, res.Torn))
	}
	var why []string
	if res.Last == nil {
		why = append(why, "no checkpoint seals it")
	} else if res.Unsealed > 0 {
		why = append(why, fmt.Sprintf("%s after the newest checkpoint (%d at %s) unsealed", base.Plural(int64(res.Unsealed), "line"), res.Last.Seq, res.Last.Time.UTC().Format(time.RFC3339Nano)))
	}
	if res.Abandoned > 0 {
		why = append(why, fmt.Sprintf("%s abandoned by %s (a crash: written after the checkpoint before it, never sealed)", base.Plural(int64(res.Abandoned), "line"), base.Plural(res.Restarts, "restart record")))
	}
	if len(res.Torn) > 0 {
		why = append(why, "torn: "+posList(g, res.Torn)+" (writes cut short; every line after them was checked)")
	}
	if res.Last != nil && res.Unsealed == 0 && !res.Last.Final {
		why = append(why, fmt.Sprintf("no final checkpoint: it ends at checkpoint %d at %s (the node still runs, or did not stop cleanly, or the tail was cut)", res.Last.Seq, res.Last.Time.UTC().Format(time.RFC3339Nano)))
	}
	return fmt.Sprintf("%s%s hold, not sealed to the end: %s%s", head, lines, strings.Join(why, "; "), tail)
}

// posList names lines of a node's files: "audit.jsonl line 4, 9".
func posList(g group, ps []mrtraudit.Pos) string {
	var out []string
	for i, p := range ps {
		if i > 0 && ps[i-1].File == p.File {
			out[len(out)-1] += ", " + strconv.Itoa(p.Line)
			continue
		}
		name := "?"
		if p.File < len(g.paths) {
			name = g.paths[p.File]
		}
		out = append(out, name+" line "+strconv.Itoa(p.Line))
	}
	return strings.Join(out, "; ")
}

// tornBeforeSealed names the torn lines before a bad one.
func tornBeforeSealed(g group, torn []mrtraudit.Pos) string {
	if len(torn) == 0 {
		return ""
	}
	return "; torn before it: " + posList(g, torn)
}

// readLogCheckpoints reads the checkpoints of a log of mrtr serve or
// proxy: JSON records (--log-format json, or a trail), or text records
// (--log-format text), whose checkpoint="..." holds the same JSON.
func readLogCheckpoints(path string) ([]mrtraudit.Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var js bytes.Buffer
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '{' {
			line = textCheckpoint(t)
		}
		js.Write(line)
		if len(line) > 0 && line[len(line)-1] != '\n' {
			js.WriteByte('\n')
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	}
	cps, err := mrtraudit.ReadCheckpoints(&js)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return cps, nil
}

// textCheckpoint turns a text log record's checkpoint="{...}" into the
// JSON record {"checkpoint":{...}}; nil when it has none.
func textCheckpoint(line []byte) []byte {
	const key = " checkpoint="
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return nil
	}
	q, err := strconv.QuotedPrefix(string(line[i+len(key):]))
	if err != nil {
		return nil
	}
	v, err := strconv.Unquote(q)
	if err != nil || !strings.HasPrefix(v, "{") {
		return nil
	}
	return []byte(`{"checkpoint":` + v + "}\n")
}
