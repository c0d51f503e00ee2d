package base

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// flagGroup is the section of --help (and of the README's flag tables) a
// flag is listed in. The sections appear in the order of the constants.
type flagGroup int

const (
	GroupListen flagGroup = iota
	GroupUpstream
	GroupKeys
	GroupPolicy
	GroupStore
	GroupAuth
	GroupLimits
	GroupTelemetry
)

// Title is the heading of a group in --help and the README.
func (g flagGroup) Title() string {
	switch g {
	case GroupListen:
		return "Listen"
	case GroupUpstream:
		return "Upstream"
	case GroupKeys:
		return "Keys"
	case GroupPolicy:
		return "Policy"
	case GroupStore:
		return "Single-use store"
	case GroupAuth:
		return "Authentication"
	case GroupLimits:
		return "Limits"
	case GroupTelemetry:
		return "Logs, metrics and traces"
	}
	return "Other"
}

// Flags is a flag set whose flags also read an MRTR_* environment
// variable, with range checks that run once flags and environment are
// both applied. Each flag is declared once, by one call that names its
// group, its type, its default and its help text; --help and the
// README's tables (TestREADMEFlags) are printed from those declarations.
// Errors name the flag, the bad value and, when the value came from the
// environment, the variable.
type Flags struct {
	Fs       *flag.FlagSet
	synopsis string
	about    string // the paragraph --help prints before the flags
	Docs     []*FlagDoc
	Envs     []envFlag
	checks   []flagCheck
	fromEnv  map[string]string // flag name -> variable it was set from
	setErr   *flagError        // the last value a flag refused, as the user reads it
	rest     *[]string         // set by Command: where the words after -- go
	restName string            // how --help names them
	Examples string            // what --help ends with: command lines, one a line
	stdout   io.Writer         // where --help goes
}

// FlagDoc is what --help and the README say about one flag.
type FlagDoc struct {
	Name  string
	Group flagGroup
	Arg   string // the value's name: "duration", "FILE"; empty for a switch
	Kind  string // the value's type, for error messages: "duration", "size"
	Def   string // the default as a reader writes it; empty: none
	Usage string
	Env   string
}

// envFlag ties a flag to its environment variable. apply, when set,
// takes the variable's value instead of FlagSet.Set (MRTR_KEYS holds a
// path or the ring itself).
type envFlag struct {
	name, env string
	Apply     func(string)
}

type flagCheck struct {
	name string
	fn   func() error // returns a *flagError for name
}

// NewFlags returns the flags of command name (like "serve"); about is the
// paragraph --help prints first.
func (a *App) NewFlags(name, synopsis, about string) *Flags {
	f := &Flags{Fs: a.NewFlagSet(name, synopsis), synopsis: synopsis, about: about, fromEnv: map[string]string{}, stdout: a.Stdout}
	f.Fs.Usage = func() { f.writeHelp(f.Fs.Output()) }
	return f
}

// envName is the variable of a flag: --replay-timeout reads MRTR_REPLAY_TIMEOUT.
func envName(flagName string) string {
	return "MRTR_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Add records the flag just registered on f.fs: its documentation, its
// variable, and a wrapper that reports a refused value in our words.
func (f *Flags) Add(g flagGroup, name, arg, kind, def, usage string) *FlagDoc {
	fl := f.Fs.Lookup(name)
	fl.Value = &trackedValue{Value: fl.Value, f: f, name: name, kind: kind}
	d := &FlagDoc{Name: name, Group: g, Arg: arg, Kind: kind, Def: def, Usage: usage, Env: envName(name)}
	f.Docs = append(f.Docs, d)
	f.Envs = append(f.Envs, envFlag{name: name, env: d.Env})
	return d
}

func (f *Flags) Check(name string, fn func() error) {
	f.checks = append(f.checks, flagCheck{name, fn})
}

// argName is the value's name in usage: the first `quoted` word of usage
// (which is then unquoted), or kind.
func argName(usage, kind string) (arg, text string) {
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			return usage[i+1 : i+1+j], usage[:i] + usage[i+1:i+1+j] + usage[i+2+j:]
		}
	}
	return kind, usage
}

// String registers a string flag.
func (f *Flags) String(g flagGroup, p *string, name, def, usage string) {
	arg, text := argName(usage, "string")
	f.Fs.StringVar(p, name, def, text)
	f.Add(g, name, arg, "string", def, text)
}

// Strings registers a repeatable string flag: each use appends a value.
func (f *Flags) Strings(g flagGroup, p *[]string, name, usage string) {
	arg, text := argName(usage, "string")
	f.Fs.Var((*stringList)(p), name, text)
	f.Add(g, name, arg, "string", "", text+" (repeatable)")
}

// List registers a repeatable string flag; its environment variable holds
// the values separated by sep.
func (f *Flags) List(g flagGroup, p *[]string, name, sep, usage string) {
	arg, text := argName(usage, "string")
	f.Fs.Func(name, text, func(v string) error {
		*p = append(*p, v)
		return nil
	})
	f.Add(g, name, arg, "string", "", text)
	f.Envs[len(f.Envs)-1].Apply = func(v string) {
		for _, x := range strings.Split(v, sep) {
			if x = strings.TrimSpace(x); x != "" {
				*p = append(*p, x)
			}
		}
	}
}

// Bool registers a switch.
func (f *Flags) Bool(g flagGroup, p *bool, name string, def bool, usage string) {
	f.Fs.BoolVar(p, name, def, usage)
	d := ""
	if def {
		d = "on"
	}
	f.Add(g, name, "", "boolean", d, usage)
}

// Duration registers a duration flag that must be positive.
func (f *Flags) Duration(g flagGroup, p *time.Duration, name string, def time.Duration, usage string) {
	f.Fs.DurationVar(p, name, def, usage)
	f.Add(g, name, "duration", "duration", ShortDuration(def), usage)
	f.Check(name, func() error {
		if *p <= 0 {
			return FlagErr(name, "%q is not a positive duration (like 90s or 5m)", p.String())
		}
		return nil
	})
}

// Int registers an integer flag of at least min.
func (f *Flags) Int(g flagGroup, p *int, name string, def, min int, usage string) {
	f.Fs.IntVar(p, name, def, usage)
	f.Add(g, name, "int", "int", strconv.Itoa(def), usage)
	f.Check(name, func() error {
		if *p < min {
			return FlagErr(name, "%d is below the minimum of %d", *p, min)
		}
		return nil
	})
}

// Int64 registers an integer flag of at least min.
func (f *Flags) Int64(g flagGroup, p *int64, name string, def, min int64, usage string) {
	f.Fs.Int64Var(p, name, def, usage)
	f.Add(g, name, "int", "int", strconv.FormatInt(def, 10), usage)
	f.Check(name, func() error {
		if *p < min {
			return FlagErr(name, "%d is below the minimum of %d", *p, min)
		}
		return nil
	})
}

// Size registers a size in bytes of at least min, written as a number
// of bytes or with a unit (4MiB, "4 MiB", 512KB; see parseSize).
func (f *Flags) Size(g flagGroup, p *int64, name string, def, min int64, usage string) {
	*p = def
	f.Fs.Var((*sizeValue)(p), name, usage)
	f.Add(g, name, "size", "size", formatSize(def), usage)
	f.Check(name, func() error {
		if *p < min {
			return FlagErr(name, "%s is below the minimum of %s", formatSize(*p), formatSize(min))
		}
		return nil
	})
}

// Choice registers a string flag limited to choices.
func (f *Flags) Choice(g flagGroup, p *string, name, def string, choices []string, usage string) {
	_, usage = argName(usage, "")
	f.Fs.StringVar(p, name, def, usage)
	f.Add(g, name, strings.Join(choices, "|"), "string", def, usage)
	f.Check(name, func() error {
		for _, c := range choices {
			if *p == c {
				return nil
			}
		}
		return FlagErr(name, "%q is not one of %s", *p, strings.Join(choices, ", "))
	})
}

// Command lets the command line end with -- and words of its own (the
// command a proxy runs): they go to p. name is how --help shows them,
// like "COMMAND [ARG...]".
func (f *Flags) Command(p *[]string, name string) {
	f.rest, f.restName = p, name
}

// Parse reads the command line, then the environment for every flag the
// command line left unset, then runs the checks. It allows no positional
// arguments, and words after -- only with Command.
func (f *Flags) Parse(getenv func(string) string, args []string) error {
	f.setErr = nil
	pos, rest, err := parseArgs(f.Fs, args, f.stdout)
	if err != nil {
		if f.setErr != nil {
			err = &UsageError{Cmd: f.Fs.Name(), Msg: f.setErr.Error()}
		}
		return Explain(f.Fs.Output(), err)
	}
	if len(pos) == 0 && f.rest == nil && len(rest) != 0 {
		pos = rest
	}
	if len(pos) != 0 {
		fmt.Fprintf(f.Fs.Output(), "mrtr %s: unexpected argument %q\n%s", f.Fs.Name(), pos[0], helpHint(f.Fs.Name()))
		return ErrUsage
	}
	if f.rest != nil {
		*f.rest = rest
	}
	set := map[string]bool{}
	f.Fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	for _, e := range f.Envs {
		val := getenv(e.env)
		if set[e.name] || val == "" {
			continue
		}
		if e.Apply != nil {
			e.Apply(val)
		} else if err := f.Fs.Set(e.name, val); err != nil {
			fe := f.setErr
			if fe == nil {
				fe = &flagError{name: e.name, msg: fmt.Sprintf("%q is not valid", val)}
			}
			fe.env = e.env
			return fe
		}
		f.fromEnv[e.name] = e.env
	}
	for _, c := range f.checks {
		if err := c.fn(); err != nil {
			var fe *flagError
			if errors.As(err, &fe) {
				fe.env = f.fromEnv[fe.name]
			}
			return err
		}
	}
	return nil
}

// trackedValue is a flag's value that, when it refuses one, leaves the
// refusal in its flags for parse to return: one message whether the
// value came from the command line or from the environment.
type trackedValue struct {
	flag.Value
	f          *Flags
	name, kind string
}

func (v *trackedValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		v.f.setErr = &flagError{name: v.name, msg: badValue(s, v.kind)}
		return err
	}
	return nil
}

// IsBoolFlag keeps a switch a switch (--stdio takes no value).
func (v *trackedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// badValue says why s is no value of kind, with an example of one.
func badValue(s, kind string) string {
	switch kind {
	case "duration":
		return fmt.Sprintf("%q is not a valid duration (like 90s, 5m or 1h30m: a number and a unit)", s)
	case "size":
		return fmt.Sprintf("%q is not a valid size (bytes, or a number and a unit: 4MiB, 4 MiB, 512KiB, 1GB)", s)
	case "int":
		return fmt.Sprintf("%q is not a valid int", s)
	case "boolean":
		return fmt.Sprintf("%q is not a valid boolean", s)
	}
	return fmt.Sprintf("%q is not a valid %s", s, kind)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// sizeValue is a size in bytes that reads units.
type sizeValue int64

func (v *sizeValue) String() string { return formatSize(int64(*v)) }

func (v *sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

// sizeUnit is the multiplier of a unit parseSize reads, in lower case:
// the binary ones (KiB = 1024) and the decimal ones (KB = 1000), as the
// IEC and the SI write them.
func sizeUnit(u string) (int64, bool) {
	switch u {
	case "", "b":
		return 1, true
	case "k", "kib":
		return 1 << 10, true
	case "kb":
		return 1000, true
	case "m", "mib":
		return 1 << 20, true
	case "mb":
		return 1000 * 1000, true
	case "g", "gib":
		return 1 << 30, true
	case "gb":
		return 1000 * 1000 * 1000, true
	}
	return 0, false
}

// parseSize reads a size: a whole number of bytes, or a number followed,
// with or without a space, by B, KiB, MiB, GiB (powers of 1024; K, M, G
// too) or KB, MB, GB (powers of 1000), in any case: 4MiB, "4 MiB", 512kb,
// 1.5MiB.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult, ok := sizeUnit(unit)
	if !ok || num == "" {
		return 0, errors.New("not a size")
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > (1<<62)/mult {
			return 0, errors.New("size too large")
		}
		return n * mult, nil
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil || x*float64(mult) > 1<<62 {
		return 0, errors.New("not a size")
	}
	return int64(x * float64(mult)), nil
}

// formatSize writes n in the largest binary unit that divides it.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// ShortDuration writes d as a person would: 5m, not 5m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// writeHelp prints the synopsis, the paragraph and the flags by group.
func (f *Flags) writeHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n", f.synopsis)
	if f.about != "" {
		fmt.Fprintf(w, "\n%s\n", wrap(f.about, "", 78))
	}
	for _, g := range f.Groups() {
		fmt.Fprintf(w, "\n%s:\n", g.Title())
		for _, d := range f.Docs {
			if d.Group != g {
				continue
			}
			head := "  --" + d.Name
			if d.Arg != "" {
				head += " " + d.Arg
			}
			var tail []string
			if d.Def != "" {
				tail = append(tail, "default "+d.Def)
			}
			if d.Env != "" { // mrtr runner's flags have none
				tail = append(tail, "$"+d.Env)
			}
			usage := d.Usage
			if len(tail) > 0 {
				usage += " (" + strings.Join(tail, ", ") + ")"
			}
			fmt.Fprintf(w, "%s\n%s\n", head, wrap(usage, "      ", 78))
		}
	}
	if f.rest != nil {
		fmt.Fprintf(w, "\nAfter the flags: -- %s\n", f.restName)
	}
	if f.Examples != "" {
		fmt.Fprintf(w, "\nExamples:\n%s", f.Examples)
	}
}

// PrintDefaults is fs.PrintDefaults with every flag written as --help and
// the README write them, --name, not the flag package's -name.
func PrintDefaults(fs *flag.FlagSet) {
	var b strings.Builder
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "  -"); ok {
			line = "  --" + rest
		}
		io.WriteString(out, line)
	}
}

// Groups are the groups f's flags are in, in order.
func (f *Flags) Groups() []flagGroup {
	seen := map[flagGroup]bool{}
	for _, d := range f.Docs {
		seen[d.Group] = true
	}
	var gs []flagGroup
	for g := GroupListen; g <= GroupTelemetry; g++ {
		if seen[g] {
			gs = append(gs, g)
		}
	}
	return gs
}

// wrap breaks s into lines of at most width columns, each starting with
// indent.
func wrap(s, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, w := range strings.Fields(s) {
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	b.WriteString(line)
	return b.String()
}

// parseArgs parses flags, allowing them before and after positional
// arguments, and returns the positional ones and, apart, the words after
// a -- (dash says there was one). A flag error is explained in one line
// with a hint to --help, not the whole usage; the usage asked for with
// --help (or -h) goes to help.
func parseArgs(fs *flag.FlagSet, args []string, help io.Writer) (pos, rest []string, err error) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(help)
			usage()
			return nil, nil, err
		}
		if err != nil {
			return nil, nil, &UsageError{Cmd: fs.Name(), Msg: flagMessage(fs, err)}
		}
		left := fs.Args()
		if n := len(args) - len(left); n > 0 && args[n-1] == "--" {
			return pos, left, nil
		}
		if len(left) == 0 {
			return pos, nil, nil
		}
		pos = append(pos, left[0])
		args = left[1:]
	}
}

// UsageError is a command line the flag package refused, in one line.
type UsageError struct{ Cmd, Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Explain prints a usage error with the hint to --help and returns
// ErrUsage; other errors it returns as they are.
func Explain(w io.Writer, err error) error {
	var ue *UsageError
	if errors.As(err, &ue) {
		fmt.Fprintf(w, "mrtr %s: %s\n%s", ue.Cmd, ue.Msg, helpHint(ue.Cmd))
		return ErrUsage
	}
	return err
}

// helpHint is the line after a usage error.
func helpHint(cmd string) string {
	return fmt.Sprintf("Run \"mrtr %s --help\" for its flags.\n", cmd)
}

// flagMessage rewords the flag package's error: flags with two dashes, as
// --help writes them, and for an unknown flag the nearest known one.
func flagMessage(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		m := "unknown flag --" + name
		if s := nearestFlag(fs, name); s != "" {
			m += " (did you mean --" + s + "?)"
		}
		return m
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "--" + strings.TrimLeft(name, "-") + " needs a value"
	}
	if strings.HasPrefix(msg, "invalid ") {
		// invalid value "x" for flag -name: ...
		if i := strings.Index(msg, " for flag -"); i > 0 {
			rest := msg[i+len(" for flag -"):]
			name, why, _ := strings.Cut(rest, ": ")
			val, _ := strconv.Unquote(strings.TrimPrefix(msg[:i], "invalid value "))
			if fl := fs.Lookup(name); fl != nil && (why == "parse error" || why == "value out of range") {
				kind, _ := flag.UnquoteUsage(fl)
				return "--" + name + ": " + badValue(val, kind)
			}
			m := "--" + name + ": " + strconv.Quote(val) + " is not valid"
			if why != "" {
				m += ": " + why
			}
			return m
		}
	}
	return msg
}

// flagAlias is the flag people mean by a name it does not have.
func flagAlias(name string) string {
	switch name {
	case "port", "host", "listen", "bind", "address":
		return "addr"
	case "key", "keyring", "key-file":
		return "keys"
	case "redis", "store":
		return "replay"
	case "verbose", "debug":
		return "log-level"
	case "metrics":
		return "metrics-addr"
	}
	return ""
}

// nearestFlag is the defined flag closest to the unknown name, or "".
func nearestFlag(fs *flag.FlagSet, name string) string {
	name = strings.ToLower(name)
	if a := flagAlias(name); a != "" && fs.Lookup(a) != nil {
		return a
	}
	best, bestD := "", len(name)/3+2
	fs.VisitAll(func(fl *flag.Flag) {
		d := editDistance(name, fl.Name)
		if strings.HasPrefix(fl.Name, name) || strings.HasPrefix(name, fl.Name) {
			d = min(d, 1)
		}
		if d < bestD { // VisitAll goes in order: the first of equals wins

			best, bestD = fl.Name, d
		}
	})
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
