# `make test` is the README's test command and what CI runs: it installs
# what the tests need (Debian's redis-server, redis-sentinel and chromium, the pinned
# conformance harness and MCP Inspector with Node 22 from npm, go-sdk's everything-server
# at go.mod's version, Debian's podman and systemd, helm and goreleaser built once into
# a cache: scripts/ship-setup.sh), then runs
# everything, strictly: tests that need Redis, the harness, a pseudo-terminal,
# the Inspector or the shipping tools fail instead of skipping.
# For a quick local run without them: go test ./... in a module (those tests skip).
.PHONY: test deps check unit fuzz bench-check serve image

GO ?= go
# An execution count, not a duration: on Go 1.26 a duration budget can end in a
# spurious "context deadline exceeded" failure when it expires while a worker is
# mid-input (golang/go#75804, fixed in Go 1.27). 150000x takes 2-3 s per target here (longer: FUZZTIME=50000000x make fuzz).
FUZZTIME ?= 150000x
export MRTR_REQUIRE_REDIS := 1
export MRTR_REQUIRE_CONFORMANCE := 1
export MRTR_REQUIRE_PTY := 1
export MRTR_REQUIRE_INSPECTOR := 1
export MRTR_REQUIRE_SHIP := 1

test: check deps unit fuzz bench-check

# The modules (go.work lists them; see docs/RELEASING.md). bench/ is tested by bench-check.
MODULES = $(shell $(GO) list -m -f '{{.Dir}}')
TESTED = $(filter-out %/bench,$(MODULES))

# Formatting, and vet in every module.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do echo "vet $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

# Everything the tests need installed; the tests themselves only check (each script's
# --check) and skip, or fail under MRTR_REQUIRE_*=1, when something is missing or stale.
# helm and goreleaser (minutes of compiling on a fresh machine) build meanwhile.
deps:
	@scripts/ship-setup.sh --tools & tools=$$!; \
	rc=0; for s in "scripts/redis.sh ensure" scripts/conformance-setup.sh scripts/everything-setup.sh \
		scripts/inspector-setup.sh; do echo "$$s"; $$s || { rc=1; break; }; done; \
	wait $$tools || rc=1; [ $$rc = 0 ] || exit 1; echo scripts/ship-setup.sh; scripts/ship-setup.sh

# Unit, contract, end-to-end, conformance and interop tests under the race detector, in
# every module but bench: the library, the command (cmd/mrtr), its app code (internal/app),
# the mcp-go adapter (mcpgo), the end-to-end tests with the consumer check (e2e) and the
# JCS oracle (reqstate against github.com/gowebpki/jcs).
unit:
	@for m in $(TESTED); do echo "test $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 15m ./...) || exit 1; done

# Short fuzzing of every fuzz target of every module, discovered by scripts/fuzz.sh
# (longer runs: FUZZTIME=50000000x make fuzz; the socket-driving targets scripts/fuzz.sh
# names take FUZZTIME_NET instead).
fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

# The bench module's own tests (every contender round-trips, every flow
# endpoint works), then each comparison benchmark once (timings are never
# asserted), all under the race detector.
bench-check:
	cd bench && $(GO) test -race -count=1 -bench . -benchtime 1x ./... -flow.warmup 0

# The OCI image of mrtr (deploy/image/Containerfile), FROM scratch, with podman:
# IMAGE=NAME:TAG and VERSION=X.Y.Z override the defaults (scripts/image.sh --help).
image:
	scripts/image.sh

# The main job: the reference server on embedded defaults.
serve:
	$(GO) run ./cmd/mrtr serve
