package audit

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
)

// ErrKeyBehind is the error of OpenFile when the trail's last checkpoint
// was signed in a later epoch than the Signer's key file is in: the key
// file was replaced by an older copy (a Secret or an emptyDir re-seeded
// at restart, a backup), and the key it holds cannot sign for the trail
// any more. Give the node the key file it evolved, or start a new trail.
var ErrKeyBehind = errors.New("audit: the key file is at an earlier epoch than the trail's last checkpoint")

// trailState is what a Writer with a Signer needs of an existing trail
// to go on with it: its last checkpoint, and the lines after it, which
// the restart abandons.
type trailState struct {
	cp     *Checkpoint // the last checkpoint; nil when the file holds none
	cpLink string      // the link to its line ("" without one)
	lines  uint64      // lines after it (or in the file, without one), a torn last one included
	hash   string      // the base64url SHA-256 of their bytes, each with its newline
	torn   bool        // the file ends inside a line
}

// scanTrail reads a trail from its start and returns its state. It reads
// every byte once, parsing only the lines that look like checkpoints.
func scanTrail(r io.Reader) (*trailState, error) {
	st := new(trailState)
	br := bufio.NewReaderSize(r, 64<<10)
	h := sha256.New()
	var line []byte
	for {
		var err error
		line, err = readLine(br, line[:0])
		if errors.Is(err, errLong) {
			// Not a line a Writer wrote: abandoned with the rest.
			h.Write(line)
			for errors.Is(err, errLong) {
				line, err = readLine(br, line[:0])
				h.Write(line)
			}
			if err == nil {
				h.Write([]byte{'\n'})
			}
			st.lines++
			if err == io.EOF {
				if len(line) > 0 {
					h.Write([]byte{'\n'})
					st.torn = true
				}
				break
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if err == nil && looksLikeCheckpoint(line) {
			if l, perr := ParseLine(line); perr == nil && l.Checkpoint != nil {
				st.cp, st.cpLink, st.lines = l.Checkpoint, linkOf(line), 0
				h.Reset()
				continue
			}
		}
		h.Write(line)
		h.Write([]byte{'\n'})
		st.lines++
		if err == io.EOF {
			st.torn = true
			break
		}
	}
	if st.lines > 0 {
		st.hash = sumOf(h)
	}
	return st, nil
}

func sumOf(h hash.Hash) string {
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// looksLikeCheckpoint is a cheap test before ParseLine: the event member
// near the start of the line.
func looksLikeCheckpoint(line []byte) bool {
	head := line[:min(len(line), 160)]
	return bytes.Contains(head, []byte(`"event":"checkpoint"`)) || bytes.Contains(head, []byte(`"event":"restart"`))
}

// restartFrom sets a Writer with a Signer to go on with the trail st
// describes: from its last checkpoint, abandoning the lines after it in
// the restart checkpoint the Writer writes first. Called before the
// Writer is shared.
func (w *Writer) restartFrom(st *trailState, path string) error {
	s := w.sign
	after := uint64(0) // the epoch the next checkpoint must be signed in, as the trail says
	var ringCert []Cert
	if cp := st.cp; cp != nil {
		after = cp.Epoch
		if cp.Next != nil {
			after = cp.Next.Epoch
		}
		if s.Mode() == KeyRingDerived {
			ringCert = w.ringRestart(cp, after)
		}
		epoch, _, _ := s.state()
		if after > epoch {
			return fmt.Errorf("audit trail %s: key epoch %d, the trail's last checkpoint needs %d: %w", path, epoch, after, ErrKeyBehind)
		}
		if pub, ok := s.pubOf(cp.Epoch); s.Mode() != KeyRingDerived && (!ok || !cp.checkBy(pub)) ||
			s.Mode() == KeyRingDerived && ringCert == nil && !cp.checkBy(s.pub) {
			w.log.Error("audit: the trail's last checkpoint is not signed by this node's key; verify will refuse the restart", "path", path, "seq", cp.Seq)
		}
		if w.opts.Node != cp.Node {
			w.log.Warn("audit: the trail's last checkpoint names another node", "path", path, "node", w.opts.Node, "trail_node", cp.Node)
		}
		w.seq, w.cpHash, w.count = cp.Seq, cp.Hash(), cp.Count+1+st.lines
		w.prev = []byte(st.cpLink)
		w.lastTime = cp.Time
	} else {
		w.count = st.lines
		w.prev = nil
	}
	w.certs = s.certsSince(after)
	if s.Mode() == KeyRingDerived {
		w.certs = ringCert
	}
	if st.lines > 0 {
		w.abandon = &Abandoned{Lines: st.lines, Hash: st.hash}
		w.log.Warn("audit: lines after the trail's last checkpoint are abandoned by a restart record (a crash, or a trail begun before checkpoints)", "path", path, "lines", st.lines)
	}
	return nil
}

// pubOf returns the public key of epoch e of the Signer's chain.
func (s *Signer) pubOf(e uint64) (PublicKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case e == 0:
		return s.pub0, true
	case e <= uint64(len(s.certs)):
		return s.certs[e-1].Pub, true
	}
	return PublicKey{}, false
}

// scanFile scans the trail at path (scanTrail).
func scanFile(path string) (*trailState, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read audit trail: %w", err)
	}
	defer f.Close()
	st, err := scanTrail(f)
	if err != nil {
		return nil, fmt.Errorf("read audit trail %s: %w", path, err)
	}
	return st, nil
}

// ringRestart sets a ring-derived Signer to the epoch of the trail it
// goes on with: the trail's own when its last checkpoint is signed by
// the Signer's key; the next one when the ring rotated (the key derives
// from another kid than the one that signed it): the key of that kid,
// if the ring still holds it, certifies the Signer's, and the restart
// checkpoint carries the certification. Called before the Writer is
// shared.
func (w *Writer) ringRestart(cp *Checkpoint, after uint64) []Cert {
	s := w.sign
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch = after
	if cp.checkBy(s.pub) || s.ring == nil {
		return nil
	}
	for _, id := range s.ring.IDs() {
		seed, err := ringSeed(s.ring, id)
		if err != nil {
			continue
		}
		old := ed25519.NewKeyFromSeed(seed)
		clear(seed)
		var pub PublicKey
		copy(pub[:], old.Public().(ed25519.PublicKey))
		if !cp.checkBy(pub) {
			clear(old)
			continue
		}
		c := Cert{Epoch: after + 1, Pub: s.pub, Since: w.now().UTC(), Seq: cp.Seq + 1}
		if c.Since.Before(cp.Time) {
			c.Since = cp.Time
		}
		copy(c.Sig[:], ed25519.Sign(old, c.message()))
		clear(old)
		s.epoch = after + 1
		w.log.Info("audit: the key ring rotated since the trail's last checkpoint; the restart certifies the key derived from the new one", "kid", id)
		return []Cert{c}
	}
	return nil
}
