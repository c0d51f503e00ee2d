//go:build unix

package stdio

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperVar makes the test binary act as a child (see helper). Its name must
// not start with MRTR_: those never reach a child.
const helperVar = "STDIO_TEST_HELPER"

// sizesVar lists the line sizes the "big" helper writes.
const sizesVar = "STDIO_TEST_SIZES"

// manyLines is how many numbered lines the "stderr" helper writes before
// its last words.
const manyLines = 2000

// floodLines is how many lines the "flood" helper writes on stderr.
const floodLines = 200000

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperVar); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is the child's side of the tests: the test binary run again with
// helperVar set to mode.
func helper(mode string) int {
	switch mode {
	case "echo":
		return echo()
	case "env":
		b, _ := json.Marshal(map[string][]string{"env": os.Environ()})
		os.Stdout.Write(append(b, '\n'))
		return echo()
	case "stderr":
		fmt.Fprint(os.Stderr, "first line\n\n\r\n   \n")
		fmt.Fprint(os.Stderr, strings.Repeat("é", 3000)+"\n") // 6000 bytes, cut inside a rune
		fmt.Fprint(os.Stderr, strings.Repeat("a", StderrLineBytes)+"\r\n")
		// The cap's edges, with either line ending.
		fmt.Fprint(os.Stderr, strings.Repeat("b", StderrLineBytes)+"\n")
		fmt.Fprint(os.Stderr, strings.Repeat("c", StderrLineBytes+1)+"\n")
		fmt.Fprint(os.Stderr, strings.Repeat("d", StderrLineBytes+1)+"\r\n")
		fmt.Fprint(os.Stderr, strings.Repeat("e", StderrLineBytes-1)+"\r\n")
		for i := range manyLines {
			fmt.Fprintf(os.Stderr, "line %d\n", i)
		}
		fmt.Fprint(os.Stderr, "last words")
		return 0
	case "slog":
		// Structured records, as a child logging with log/slog writes
		// them (mrtr serve --stdio among them), and lines that only look so.
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn("NO KEY RING GIVEN: sealing with an ephemeral key", "pid", 1, "stream", "stdout")
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("upstream \x1b[2Jdown", "attempt", 3)
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).Debug("quiet")
		fmt.Fprint(os.Stderr, `{"level":30,"time":1,"msg":"pino says hi","hostname":"h"}`+"\n")
		fmt.Fprint(os.Stderr, "key=value without a level\n")
		fmt.Fprint(os.Stderr, `level=WARN msg="unterminated`+"\n")
		fmt.Fprint(os.Stderr, `level=INFO msg="mrtr drained: no call held or in flight"`+"\n")
		return 0
	case "flood":
		// floodLines lines on stderr, as fast as it can, then exits.
		w := bufio.NewWriterSize(os.Stderr, 64<<10)
		for range floodLines {
			w.WriteString("y\n")
		}
		w.Flush()
		return 0
	case "burst-pause-line":
		// 150 lines at once, then, after one line of stdin, one more.
		for i := range 150 {
			fmt.Fprintf(os.Stderr, "burst %d\n", i)
		}
		fmt.Println(`"burst done"`)
		bufio.NewReader(os.Stdin).ReadBytes('\n')
		fmt.Fprintln(os.Stderr, "after the pause")
		return 0
	case "exit":
		bufio.NewReader(os.Stdin).ReadBytes('\n')
		return 3
	case "big":
		// One JSON string per size, each line exactly that long before its
		// "\r\n", then {"after":true}.
		for _, f := range strings.Split(os.Getenv(sizesVar), ",") {
			n, _ := strconv.Atoi(f)
			w := bufio.NewWriter(os.Stdout)
			w.WriteByte('"')
			for i := 0; i < n-2; i++ {
				w.WriteByte('x')
			}
			w.WriteString("\"\r\n")
			w.Flush()
		}
		fmt.Println(`{"after":true}`)
		return echo()
	case "stubborn":
		// Ignores SIGTERM and stdin EOF, and has a grandchild that ignores
		// SIGTERM too. Says on stderr what it saw.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			for range term {
				fmt.Fprintln(os.Stderr, "got SIGTERM")
			}
		}()
		fmt.Printf(`{"grandchild":%d}`+"\n", grandchild())
		io.Copy(io.Discard, os.Stdin)
		fmt.Fprintln(os.Stderr, "stdin EOF")
		for {
			time.Sleep(time.Hour)
		}
	case "orphaner":
		// Leaves a grandchild behind when it exits after one line of stdin.
		fmt.Printf(`{"grandchild":%d}`+"\n", grandchild())
		bufio.NewReader(os.Stdin).ReadBytes('\n')
		return 0
	case "sleeper":
		// Ignores SIGTERM and stdin, says it is ready, sleeps.
		signal.Ignore(syscall.SIGTERM)
		fmt.Println(`"ready"`)
		for {
			time.Sleep(time.Hour)
		}
	case "closeout":
		// Closes its stdout after one message and lives on, ignoring
		// SIGTERM and stdin.
		signal.Ignore(syscall.SIGTERM)
		fmt.Println(`"closing"`)
		os.Stdout.Close()
		for {
			time.Sleep(time.Hour)
		}
	case "parent-of-nobody":
		// Starts a sleep as nobody through Start and prints its pid.
		c, err := Start(Config{Path: "/bin/sleep", Args: []string{"600"}, User: &User{Uid: 65534, Gid: 65534}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(c.Pid())
		for {
			time.Sleep(time.Hour)
		}
	case "parent":
		// Starts a sleeper through Start and prints its pid.
		self, _ := os.Executable()
		c, err := Start(Config{Path: self, Env: []string{helperVar + "=sleeper"}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		<-c.Recv()
		fmt.Println(c.Pid())
		for {
			time.Sleep(time.Hour)
		}
	}
	fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
	return 2
}

// echo writes every stdin line back on stdout, and exits 0 on EOF.
func echo() int {
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := os.Stdout.Write(line); werr != nil {
				return 1
			}
		}
		if err != nil {
			return 0
		}
	}
}

// grandchild starts a sleeper in this process's group, waits until it is
// ready, and returns its pid.
func grandchild() int {
	self, _ := os.Executable()
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperVar+"=sleeper")
	out, err := cmd.StdoutPipe()
	if err != nil {
		panic(err)
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		panic(err)
	}
	return cmd.Process.Pid
}
