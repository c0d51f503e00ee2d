// Package e2e holds the end-to-end tests of the reference server: the mrtr
// binary is built once and run as `mrtr serve` on 127.0.0.1, then driven by
// the official MCP conformance harness, by MCP clients that nobody in this
// module wrote (go-sdk's, mark3labs/mcp-go's and the TypeScript SDK's), each
// through its own Multi Round-Trip Request loop, and by multi-node tests:
// two servers sharing a key ring and a real Redis (pause on one node, resume
// on the other; 30 concurrent resumes of one token; a Redis outage and
// recovery; a key rotation rolled out node by node) and a bounded load test
// (-load.duration, 3 s by default; see docs/BENCHMARKS.md).
//
// The package has no non-test code, and its tests install nothing: `make deps`
// does (make test runs it first). The conformance and TypeScript tests need
// the pinned harness in conformance/node_modules (scripts/conformance-setup.sh),
// the proxy's conformance tests go-sdk's everything-server in conformance/bin
// (scripts/everything-setup.sh), and the browser test chromium and the pinned
// Inspector (scripts/inspector-setup.sh). Each test runs its script's --check
// and skips when that is missing or stale, unless MRTR_REQUIRE_CONFORMANCE=1
// (MRTR_REQUIRE_INSPECTOR=1 for the browser test) makes it a failure. The
// Redis tests start redis-server through internal/testing/testredis and likewise fail
// instead of skipping when MRTR_REQUIRE_REDIS=1 (make test sets all three).
// The shipping tests (ship_*_test.go: the image built with podman, the Helm
// chart rendered by helm and decoded into the k8s.io/api types, the
// goreleaser config, the systemd unit) need scripts/ship-setup.sh's tools and
// likewise fail instead of skipping when MRTR_REQUIRE_SHIP=1.
package e2e
