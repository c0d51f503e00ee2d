//go:build linux

package runner

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// helperVar makes the test binary a peer of a runner (see helper); its
// name does not start with MRTR_.
const helperVar = "RUNNER_TEST_HELPER"

// socketVar names the socket the helper connects to.
const socketVar = "RUNNER_TEST_SOCKET"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperVar); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is a peer of another uid: "connect" dials the socket, sends one
// message and prints the first line back, or "closed" when the runner
// closes the connection first.
func helper(mode string) int {
	if mode != "connect" {
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := Dial(ctx, os.Getenv(socketVar), DialOptions{})
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close(ctx)
	if err := c.Send([]byte(`{"hello":"from another uid"}`)); err != nil {
		fmt.Println("closed")
		return 0
	}
	select {
	case m, ok := <-c.Recv():
		if !ok {
			fmt.Println("closed")
			return 0
		}
		fmt.Println(string(m))
	case <-ctx.Done():
		fmt.Println("timeout")
	}
	return 0
}

// firstLine reads one line of s.
func firstLine(s *bufio.Scanner) string {
	if s.Scan() {
		return strings.TrimSpace(s.Text())
	}
	return ""
}
