# `make test` is the README's test command and what CI runs: it installs
# what the tests need (Debian's redis-server, redis-sentinel and chromium, the pinned
# conformance harness and MCP Inspector with Node 22 from npm, go-sdk's everything-server
# at go.mod's version), then runs
# everything, strictly: tests that need Redis, the harness, a pseudo-terminal
# or the Inspector fail instead of skipping.
# For a quick local run without them: go test ./... (those tests skip).
.PHONY: test deps check unit fuzz bench-check serve

GO ?= go
# An execution count, not a duration: on Go 1.26 a duration budget can end in a
# spurious "context deadline exceeded" failure when it expires while a worker is
# mid-input (golang/go#75804, fixed in Go 1.27). 300000x takes 4-6 s per target here.
FUZZTIME ?= 300000x
export MRTR_REQUIRE_REDIS := 1
export MRTR_REQUIRE_CONFORMANCE := 1
export MRTR_REQUIRE_PTY := 1
export MRTR_REQUIRE_INSPECTOR := 1

test: check deps unit fuzz bench-check

# Formatting and vet, for the library and the bench module.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd mcpgo && $(GO) vet ./...

# Everything the tests need installed; the tests themselves only check (each script's
# --check) and skip, or fail under MRTR_REQUIRE_*=1, when something is missing or stale.
deps:
	scripts/redis.sh ensure
	scripts/conformance-setup.sh
	scripts/everything-setup.sh
	scripts/inspector-setup.sh

# Unit, contract, end-to-end, conformance and interop tests under the race detector,
# the JCS oracle module (reqstate against github.com/gowebpki/jcs) and the mcp-go adapter's module.
unit:
	$(GO) test -race -count=1 -timeout 15m ./...
	cd reqstate/jcsoracle && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	cd mcpgo && $(GO) vet ./... && $(GO) test -race -count=1 ./...

# Short fuzzing of every decoder of untrusted input (longer runs: FUZZTIME=50000000x make fuzz).
fuzz:
	@for f in FuzzOpen FuzzMalleability FuzzRoundTrip FuzzDecodePayload FuzzCanonicalize FuzzBindingInjective FuzzValidJSON FuzzParseKeyRing; do \
		echo "fuzz reqstate $$f ($(FUZZTIME))"; \
		out=$$($(GO) test ./reqstate -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) 2>&1) || { echo "$$out"; exit 1; }; \
	done
	@for t in "./proxy FuzzParseRequest" "./proxy FuzzParseResponse" "./proxy FuzzEventReader" "./internal/mcpwire FuzzParseObject" "./internal/mcpwire FuzzMissing" "./internal/mcpwire FuzzCapsFromValue"; do \
		set -- $$t; echo "fuzz $$1 $$2 ($(FUZZTIME))"; \
		out=$$($(GO) test $$1 -run '^$$' -fuzz "^$$2$$" -fuzztime $(FUZZTIME) 2>&1) || { echo "$$out"; exit 1; }; \
	done
	@echo "fuzz reqstate/jcsoracle FuzzCanonicalizeJCS ($(FUZZTIME))"; \
	out=$$(cd reqstate/jcsoracle && $(GO) test . -run '^$$' -fuzz '^FuzzCanonicalizeJCS$$' -fuzztime $(FUZZTIME) 2>&1) || { echo "$$out"; exit 1; }
	@for f in FuzzNullResponses FuzzRewriteMessage; do \
		echo "fuzz mcpgo $$f ($(FUZZTIME))"; \
		out=$$(cd mcpgo && $(GO) test . -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) 2>&1) || { echo "$$out"; exit 1; }; \
	done
	@for f in FuzzParseJWKS FuzzVerify FuzzParseAuthorization; do \
		echo "fuzz bearer $$f ($(FUZZTIME))"; \
		out=$$($(GO) test ./bearer -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) 2>&1) || { echo "$$out"; exit 1; }; \
	done

# The bench module's own tests (every contender round-trips, every flow
# endpoint works), then each comparison benchmark once (timings are never
# asserted), all under the race detector.
bench-check:
	cd bench && $(GO) test -race -count=1 -bench . -benchtime 1x ./... -flow.warmup 0

# The main job: the reference server on embedded defaults.
serve:
	$(GO) run ./cmd/mrtr serve
