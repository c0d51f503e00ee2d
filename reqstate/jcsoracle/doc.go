// Package jcsoracle holds no code, only tests: it checks
// reqstate.Canonicalize against github.com/gowebpki/jcs, an independent,
// maintained RFC 8785 implementation, on RFC 8785's test data, on random
// documents and doubles, and under fuzzing (FuzzCanonicalizeJCS). It is a
// module of its own so that the library's go.mod stays lean.
//
// Where both accept an input, the outputs must be byte-identical. Where
// they disagree on accepting it, the difference must be one reqstate
// documents, on purpose stricter than RFC 8785 alone:
//
//   - numbers whose canonical form is another number
//     (reqstate.ErrInexactNumber), which RFC 8785 maps to a neighbour and
//     reqstate refuses so that the arguments hash stays injective;
//   - nesting deeper than reqstate.MaxJSONDepth (64; gowebpki allows
//     10,000).
//
// Everything else gowebpki/jcs rejects, reqstate must reject too.
package jcsoracle
