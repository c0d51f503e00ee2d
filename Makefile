# The test command of the README: everything CI runs.
.PHONY: test check unit fuzz bench-check serve

GO ?= go
FUZZTIME ?= 5s

test: check unit fuzz bench-check

# Formatting and vet, for the library and the bench module.
check:
	@out=$$(gofmt -l . | grep -v '^conformance/node_modules/'); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

# Unit, contract and end-to-end tests under the race detector.
unit:
	$(GO) test -race -count=1 ./...

# Short fuzzing of every decoder of untrusted input (longer runs: FUZZTIME=10m make fuzz).
fuzz:
	@for f in FuzzOpen FuzzMalleability FuzzRoundTrip FuzzDecodePayload FuzzCanonicalize FuzzBindingInjective; do \
		echo "fuzz reqstate $$f"; \
		$(GO) test ./reqstate -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) >/dev/null || exit 1; \
	done

# The comparison benchmarks compile and run once (timings are never asserted).
bench-check:
	cd bench && $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x ./...

serve:
	$(GO) run ./cmd/mrtr serve
