// A test-only module: it compares reqstate's RFC 8785 canonicalizer with
// an independent implementation, github.com/gowebpki/jcs, without adding
// that to the library's go.mod. Run with `make unit` / `make fuzz`.
module github.com/mrtr-go/mrtr/reqstate/jcsoracle

go 1.26.0

require (
	github.com/gowebpki/jcs v1.0.2
	github.com/mrtr-go/mrtr v0.0.0-00010101000000-000000000000
)
