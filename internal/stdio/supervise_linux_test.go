package stdio

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSupervisorArgv: with Config.Supervisor the child is the supervisor,
// given the command's resolved path, then its argv as configured, and
// SupervisorParentVar set to this process's pid. A shell stands in for
// the supervisor and reports what it got.
func TestSupervisorArgv(t *testing.T) {
	script := `printf '{"got":"%s|%s|%s"}\n' "$0" "$*" "$` + SupervisorParentVar + `"`
	ch, err := Start(Config{Path: "sh", Args: []string{"-c", "exit 0"},
		Supervisor: []string{"/bin/sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Stop(context.Background())
	var msg []byte
	select {
	case msg = <-ch.Recv():
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor said nothing")
	}
	want := "|sh -c exit 0|" + strconv.Itoa(os.Getpid())
	got := strings.TrimSuffix(strings.TrimPrefix(string(msg), `{"got":"`), `"}`)
	path, rest, _ := strings.Cut(got, "|")
	if !strings.HasPrefix(path, "/") || !strings.HasSuffix(path, "/sh") || "|"+rest != want {
		t.Errorf("the supervisor got %q, want the resolved path of sh then %q", got, want)
	}
}
