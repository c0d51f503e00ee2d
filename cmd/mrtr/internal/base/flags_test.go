package base

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestSizes pins issue 21 item 9: sizes take units, with or without a
// space, as the docs write them; everywhere a size is taken.
func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{
		"1048576": 1 << 20, "4MiB": 4 << 20, "4 MiB": 4 << 20, "4 mib": 4 << 20, "16KiB": 16 << 10,
		"512 KB": 512000, "1GB": 1e9, "1 GiB": 1 << 30, "100B": 100, "2M": 2 << 20, "1.5 MiB": 3 << 19, " 8 KiB ": 8 << 10,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "4 MiBs", "-1", "4 TB", "1e3", "99999999999 GiB", "4..5MiB"} {
		if got, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", bad, got)
		}
	}
	for n, want := range map[int64]string{1 << 20: "1 MiB", 4 << 20: "4 MiB", 16 << 10: "16 KiB", 1000: "1000 B", 0: "0 B", 3 << 30: "3 GiB"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}

}

// TestFlagsCommandAndStrings: the words after -- go to Command's slice
// (the command a proxy runs, its own flags untouched), a repeatable flag
// collects every use, and both are listed by --help in their group.
func TestFlagsCommandAndStrings(t *testing.T) {
	var help bytes.Buffer
	a := &App{Stdout: &help, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	var (
		command, env []string
		era          string
	)
	newSet := func() *Flags {
		command, env, era = nil, nil, ""
		f := a.NewFlags("proxy", "mrtr proxy [flags] -- COMMAND [ARG...]", "")
		f.Strings(GroupUpstream, &env, "upstream-env", "`K=V` for the command's environment")
		f.Choice(GroupUpstream, &era, "upstream-era", "auto", []string{"auto", "modern", "legacy"}, "the upstream's protocol era")
		f.Command(&command, "COMMAND [ARG...]")
		return f
	}
	if err := newSet().Parse(a.Getenv, []string{"--upstream-env", "A=1", "--upstream-env=B=2", "--upstream-era", "legacy", "--", "npx", "-y", "pkg", "--upstream-era", "x"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(command, " ") != "npx -y pkg --upstream-era x" || strings.Join(env, ",") != "A=1,B=2" || era != "legacy" {
		t.Fatalf("command %q, env %q, era %q", command, env, era)
	}
	if err := newSet().Parse(a.Getenv, []string{"npx"}); err == nil {
		t.Fatal("a command without -- accepted")
	}
	help.Reset()
	newSet().Parse(a.Getenv, []string{"--help"})
	for _, want := range []string{"Upstream:\n  --upstream-env K=V\n", "(repeatable)", "  --upstream-era auto|modern|legacy\n", "After the flags: -- COMMAND [ARG...]"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, help.String())
		}
	}
}

// TestPlural pins issue 30 item 10: one is singular.
func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Plural(1, "character"), "1 character"},
		{Plural(2, "character"), "2 characters"},
		{Plural(int64(0), "request"), "0 requests"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
