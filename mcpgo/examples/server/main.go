// Command server is an mcp-go MCP server whose paused calls are sealed by
// mrtr: the demo tools deploy and guess_number, and the fixtures of the
// conformance suite's input-required-result-* scenarios, at
// http://127.0.0.1:8080/mcp for clients of every protocol version.
//
//	go run ./examples/server --addr 127.0.0.1:8080 [--keys keys.json]
//
// Without --keys it seals with an ephemeral key ring (tokens die with the
// process).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/mcpgo"
	"github.com/mrtr-go/mrtr/mcpgo/internal/example"
	"github.com/mrtr-go/mrtr/replay"
	"github.com/mrtr-go/mrtr/reqstate"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	keys := flag.String("keys", "", "JSON key ring file (default: an ephemeral key ring)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var ring *reqstate.KeyRing
	var err error
	if *keys != "" {
		ring, err = reqstate.LoadKeyRing(*keys)
	} else {
		log.Warn("no --keys: sealing with an ephemeral key ring; paused calls do not survive a restart")
		ring, err = reqstate.GenerateKeyRing("ephemeral", nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	guard := mrtr.New(reqstate.New(ring, nil), &mrtr.Options{Store: replay.NewMemory(nil), Logger: log})
	_, a := example.New(guard, nil, &mcpgo.Options{Logger: log})
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpgo.NewHTTPHandler(a))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	log.Info("serving", "url", "http://"+ln.Addr().String()+"/mcp")
	if err := http.Serve(ln, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
