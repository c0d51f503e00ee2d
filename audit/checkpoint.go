package audit

import (
	"bufio"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"
)

// The events of the lines a Writer with a Signer adds to a trail.
const (
	// EventCheckpoint: a signed checkpoint of the trail (Line.Checkpoint).
	EventCheckpoint = "checkpoint"
	// EventRestart: a signed checkpoint that abandons the lines written
	// after the checkpoint before it (a crash): Checkpoint.Abandoned.
	EventRestart = "restart"
	// EventCerts: certifications (Line.Certs) that open a trail begun
	// with a key evolved too many times for its first checkpoint to carry
	// them all; each is checked against the one before, from FILE.pub.
	EventCerts = "certs"
)

// MaxCertsPerLine bounds the certifications one line carries (about
// 250 bytes each, far below MaxLineBytes); a trail begun with a key of a
// later epoch opens with certs lines of at most this many, then its
// first checkpoint.
const MaxCertsPerLine = 1000

// certsPerLine is MaxCertsPerLine, but in tests.
var certsPerLine = MaxCertsPerLine

// CheckpointLogKey is the attribute key under which a checkpoint is
// logged (slog.Any(CheckpointLogKey, cp) from Options.OnCheckpoint), and
// the member ReadCheckpoints looks for.
const CheckpointLogKey = "checkpoint"

// Checkpoint seals a trail up to a line: signed by the node's key of its
// epoch over domain-separated bytes of every member but Sig (see
// message). It is the checkpoint member of a checkpoint or restart line,
// and the record a log pipeline carries off the host.
type Checkpoint struct {
	Node  string    `json:"node"`  // the node that wrote the trail
	Seq   uint64    `json:"seq"`   // 1 for the trail's first checkpoint, then one more each
	Count uint64    `json:"count"` // lines of the trail before this one, since it began (all files)
	Head  string    `json:"head"`  // the link to the line this one links to (its prev): line Count, or for a restart line Count-Abandoned.Lines
	Time  time.Time `json:"time"`  // UTC; the line's time
	Prev  string    `json:"prev"`  // Hash of the checkpoint before; "" for the first
	Epoch uint64    `json:"epoch"` // the epoch of the key that signs it
	// Certs lead from the epoch after the previous checkpoint's (epoch 0,
	// FILE.pub, for the first) to Epoch: on the first checkpoint of a
	// trail begun with an evolved key, and on a restart after the key
	// file evolved past the trail.
	Certs []Cert `json:"certs,omitempty"`
	// Abandoned, on a restart line, names the lines written after the
	// checkpoint before it that it gives up: unsealed (a crash).
	Abandoned *Abandoned `json:"abandoned,omitempty"`
	// Next certifies the next epoch's key: the last checkpoint of an
	// epoch.
	Next  *Cert     `json:"next,omitempty"`
	Final bool      `json:"final,omitempty"` // written by a clean stop
	Sig   Signature `json:"sig"`
}

// Abandoned names the lines a restart gives up: how many, and the
// base64url SHA-256 of their bytes, each with its newline (a torn last
// line with the newline the restart ends it with).
type Abandoned struct {
	Lines uint64 `json:"lines"`
	Hash  string `json:"hash"`
}

const checkpointLabel = "mrtr.audit/v2 checkpoint\x00"

// message returns the bytes a checkpoint's signature covers: a label,
// then every member but sig in a fixed binary form (lengths before
// variable fields, integers big endian, times as Unix nanoseconds, links
// and hashes as their 32 raw bytes). ok is false for a member that
// cannot be encoded (a link that is not one).
func (c *Checkpoint) message() (b []byte, ok bool) {
	b = make([]byte, 0, 256)
	b = append(b, checkpointLabel...)
	b = be64(b, uint64(len(c.Node)))
	b = append(b, c.Node...)
	b = be64(b, c.Seq)
	b = be64(b, c.Count)
	if b, ok = appendRaw(b, c.Head); !ok {
		return nil, false
	}
	b = be64(b, uint64(c.Time.UnixNano()))
	if b, ok = appendRaw(b, c.Prev); !ok {
		return nil, false
	}
	b = be64(b, c.Epoch)
	b = be64(b, uint64(len(c.Certs)))
	for i := range c.Certs {
		b = appendCert(b, &c.Certs[i])
	}
	if a := c.Abandoned; a != nil {
		b = append(b, 1)
		b = be64(b, a.Lines)
		if b, ok = appendRaw(b, a.Hash); !ok || a.Hash == "" {
			return nil, false
		}
	} else {
		b = append(b, 0)
	}
	if c.Next != nil {
		b = append(b, 1)
		b = appendCert(b, c.Next)
	} else {
		b = append(b, 0)
	}
	if c.Final {
		return append(b, 1), true
	}
	return append(b, 0), true
}

// appendRaw appends a link or hash ("" or 43 base64url characters) as a
// length byte and its raw bytes.
func appendRaw(b []byte, s string) ([]byte, bool) {
	if s == "" {
		return append(b, 0), true
	}
	var raw [sha256.Size]byte
	if len(s) != 43 {
		return nil, false
	}
	if n, err := base64.RawURLEncoding.Decode(raw[:], []byte(s)); err != nil || n != len(raw) {
		return nil, false
	}
	if base64.RawURLEncoding.EncodeToString(raw[:]) != s { // one text per value
		return nil, false
	}
	b = append(b, sha256.Size)
	return append(b, raw[:]...), true
}

func appendCert(b []byte, c *Cert) []byte {
	b = be64(b, c.Epoch)
	b = append(b, c.Pub[:]...)
	b = be64(b, uint64(c.Since.UnixNano()))
	b = be64(b, c.Seq)
	return append(b, c.Sig[:]...)
}

// Hash returns the base64url SHA-256 of the checkpoint's signed bytes
// and signature: the next checkpoint's Prev. It is "" for a checkpoint
// that cannot be encoded.
func (c *Checkpoint) Hash() string {
	m, ok := c.message()
	if !ok {
		return ""
	}
	h := sha256.New()
	h.Write(m)
	h.Write(c.Sig[:])
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// checkBy reports whether c is signed by pub.
func (c *Checkpoint) checkBy(pub PublicKey) bool {
	m, ok := c.message()
	return ok && ed25519.Verify(pub[:], m, c.Sig[:])
}

// MarshalJSON encodes the checkpoint as it appears in a trail line: the
// members in the order of Checkpoint's fields, those marked omitempty
// left out when empty.
func (c Checkpoint) MarshalJSON() ([]byte, error) { return appendCheckpoint(nil, &c), nil }

func appendCheckpoint(dst []byte, c *Checkpoint) []byte {
	dst = append(dst, `{"node":`...)
	dst = appendString(dst, c.Node)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, c.Seq, 10)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, c.Count, 10)
	dst = append(dst, `,"head":`...)
	dst = appendString(dst, c.Head)
	dst = append(dst, `,"time":`...)
	dst = appendTime(dst, c.Time)
	dst = append(dst, `,"prev":`...)
	dst = appendString(dst, c.Prev)
	dst = append(dst, `,"epoch":`...)
	dst = strconv.AppendUint(dst, c.Epoch, 10)
	if len(c.Certs) > 0 {
		dst = appendCerts(append(dst, `,"certs":`...), c.Certs)
	}
	if a := c.Abandoned; a != nil {
		dst = append(dst, `,"abandoned":{"lines":`...)
		dst = strconv.AppendUint(dst, a.Lines, 10)
		dst = append(dst, `,"hash":`...)
		dst = appendString(dst, a.Hash)
		dst = append(dst, '}')
	}
	if c.Next != nil {
		dst = append(dst, `,"next":`...)
		dst = appendCertJSON(dst, c.Next)
	}
	if c.Final {
		dst = append(dst, `,"final":true`...)
	}
	dst = append(dst, `,"sig":"`...)
	dst = base64.RawURLEncoding.AppendEncode(dst, c.Sig[:])
	return append(dst, '"', '}')
}

func appendCerts(dst []byte, cs []Cert) []byte {
	dst = append(dst, '[')
	for i := range cs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCertJSON(dst, &cs[i])
	}
	return append(dst, ']')
}

func appendCertJSON(dst []byte, c *Cert) []byte {
	dst = append(dst, `{"epoch":`...)
	dst = strconv.AppendUint(dst, c.Epoch, 10)
	dst = append(dst, `,"pub":"`...)
	dst = append(dst, c.Pub.String()...)
	dst = append(dst, `","since":`...)
	dst = appendTime(dst, c.Since)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, c.Seq, 10)
	dst = append(dst, `,"sig":"`...)
	dst = base64.RawURLEncoding.AppendEncode(dst, c.Sig[:])
	return append(dst, '"', '}')
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// ReadCheckpoints reads a log, one JSON record a line (slog's
// JSONHandler, or a trail), and returns every checkpoint in it: the
// value of a member named CheckpointLogKey (at the top or inside a
// group) that decodes as one. It checks no signature (VerifySealed
// does). Lines that are not JSON, or hold no checkpoint, are passed
// over; a line longer than MaxLineBytes too. The error is r's.
func ReadCheckpoints(r io.Reader) ([]Checkpoint, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []Checkpoint
	var line []byte
	for {
		var err error
		line, err = readLine(br, line[:0])
		if len(line) > 0 && !errors.Is(err, errLong) {
			out = findCheckpoints(out, line, 0)
		}
		if errors.Is(err, errLong) {
			// Skip the rest of the long line.
			for errors.Is(err, errLong) {
				line, err = readLine(br, line[:0])
			}
			continue
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// findCheckpoints appends the checkpoints of the JSON object b, looking
// into nested objects (slog groups) up to a small depth.
func findCheckpoints(out []Checkpoint, b []byte, depth int) []Checkpoint {
	var m map[string]json.RawMessage
	if depth > 4 || json.Unmarshal(b, &m) != nil {
		return out
	}
	for k, v := range m {
		if len(v) == 0 || v[0] != '{' {
			continue
		}
		if k == CheckpointLogKey {
			var c Checkpoint
			if json.Unmarshal(v, &c) == nil && c.Seq > 0 && c.Sig != (Signature{}) {
				c.Time = c.Time.UTC()
				out = append(out, c)
			}
			continue
		}
		out = findCheckpoints(out, v, depth+1)
	}
	return out
}
