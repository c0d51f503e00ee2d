package gosdk_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/internal/testing/adaptertest"
	"github.com/mrtr-go/mrtr/replay"
)

// settleFails wraps a memory store (set once the server's clock exists)
// whose Commits and Releases fail without reaching it, as calls lost to a
// store timeout do.
type settleFails struct {
	mu    sync.Mutex
	inner replay.Store
}

func (s *settleFails) Reserve(ctx context.Context, id string, exp time.Time) (replay.Reservation, error) {
	s.mu.Lock()
	inner := s.inner
	s.mu.Unlock()
	if _, err := inner.Reserve(ctx, id, exp); err != nil {
		return nil, err
	}
	return lostSettle{}, nil
}

type lostSettle struct{}

func (lostSettle) Commit(context.Context) error  { return errors.New("i/o timeout") }
func (lostSettle) Release(context.Context) error { return errors.New("i/o timeout") }

// startSettleFails runs the test server on a store whose settling fails.
func startSettleFails(t *testing.T, o mrtr.Options) (*env, *adaptertest.SyncBuffer) {
	t.Helper()
	store := &settleFails{}
	logs := new(adaptertest.SyncBuffer)
	o.Store = store
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	e := startServer(t, serverOpts{guard: o})
	store.mu.Lock()
	store.inner = replay.NewMemory(&replay.MemoryOptions{Now: e.clk.Now})
	store.mu.Unlock()
	return e, logs
}

// A commit that fails after the handler succeeded: the client gets the
// handler's result (not an error inviting a retry), the failure is logged,
// and the token stays spent: a replay 2m1s later, long past the lease that
// reservations used to have, is refused.
func TestCommitFailsAfterSuccess(t *testing.T) {
	e, logs := startSettleFails(t, mrtr.Options{AnonymousTTL: 5 * time.Minute}) // the test client is anonymous
	cs := connect(t, e, clientOpts{manual: true})
	tok := pauseDeploy(t, cs, prodArgs)
	params := &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: accept(map[string]any{"approve": true})}
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError || !strings.HasPrefix(resultText(t, res), "deployed api to production") {
		t.Fatalf("resume whose commit fails = %v, %+v; want the handler's result", err, res)
	}
	if !strings.Contains(logs.String(), "single-use store commit failed") {
		t.Fatalf("the failed commit was not logged:\n%s", logs)
	}
	e.clk.Advance(2*time.Minute + time.Second)
	_, err = cs.CallTool(t.Context(), params)
	wantReject(t, err, mrtr.ReasonReplayed)
	if n := e.probe.Runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
}

// A release that fails after a handler error: the client gets the handler's
// error, and the token stays reserved (a retry is refused) rather than
// becoming usable in an unknown state.
func TestReleaseFailsAfterError(t *testing.T) {
	e, logs := startSettleFails(t, mrtr.Options{})
	cs := connect(t, e, clientOpts{manual: true})
	tok := pauseDeploy(t, cs, prodArgs)
	params := &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: accept(map[string]any{"approve": true})}
	e.probe.FailNext()
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || !res.IsError || !strings.Contains(resultText(t, res), "deployment backend down") {
		t.Fatalf("failing handler whose release fails = %v, %+v; want the handler's error", err, res)
	}
	if !strings.Contains(logs.String(), "single-use store release failed") {
		t.Fatalf("the failed release was not logged:\n%s", logs)
	}
	_, err = cs.CallTool(t.Context(), params)
	wantReject(t, err, mrtr.ReasonReplayed)
}

// With ConsumeOnError a handler error spends the token: the retry that the
// default policy allows is refused.
func TestConsumeOnErrorThroughAdapter(t *testing.T) {
	e := startServer(t, serverOpts{guard: mrtr.Options{Store: useMemory, ConsumeOnError: true}})
	cs := connect(t, e, clientOpts{manual: true})
	tok := pauseDeploy(t, cs, prodArgs)
	params := &mcp.CallToolParams{Name: "deploy", Arguments: prodArgs, RequestState: tok, InputResponses: accept(map[string]any{"approve": true})}
	e.probe.FailNext()
	if res, err := cs.CallTool(t.Context(), params); err != nil || !res.IsError {
		t.Fatalf("failing handler: %v %+v", err, res)
	}
	_, err := cs.CallTool(t.Context(), params)
	wantReject(t, err, mrtr.ReasonReplayed)
	if n := e.probe.Runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
}
