package audit

import "time"

// Checkpoint writes a checkpoint now, sealing every line written before
// it, and returns the error of its write. A Writer without a Signer
// writes none and returns nil. The Writer writes checkpoints on its own
// (Options.Signer); this is for a caller that must seal at a moment of
// its choosing.
func (w *Writer) Checkpoint() error {
	if w.sign == nil {
		return nil
	}
	return w.checkpoint(false)
}

// checkpoint writes a checkpoint line (final at Close), as a call writes
// its line: queued under the lock, written with the lines queued with it
// (group commit), so no call waits for it longer than for its own
// write. When the epoch is due, the next epoch's key is prepared first,
// outside the lock (the key file's replacement and its fsyncs), and
// certified by this checkpoint. Then the trail is fsynced and the
// checkpoint handed to Options.OnCheckpoint: what a log carries off the
// host is on the disk first.
func (w *Writer) checkpoint(final bool) error {
	w.cpMu.Lock()
	defer w.cpMu.Unlock()
	at := w.now()
	l := &Line{Event: EventCheckpoint, Time: at, Node: w.opts.Node, Checkpoint: &Checkpoint{Final: final}}
	w.mu.Lock()
	due, seq := w.epochDue(at), w.seq+1 // only this goroutine writes checkpoints (cpMu)
	w.mu.Unlock()
	if due {
		evo, err := w.sign.prepare(at, seq)
		switch {
		case err != nil:
			w.log.Error("audit: "+err.Error(), "mode", KeyStatic.String())
			if w.opts.OnError != nil {
				w.opts.OnError(err)
			}
		case evo != nil:
			l.evo = evo
			l.Checkpoint.Next = &evo.cert
		}
	}
	if err := w.write(l, nil); err != nil {
		return err
	}
	w.mu.Lock()
	f := w.file
	w.mu.Unlock()
	if f != nil {
		if err := f.Sync(); err != nil {
			w.log.Warn("audit: the trail was not fsynced after a checkpoint", "error", err)
		}
	}
	if w.opts.OnCheckpoint != nil {
		w.opts.OnCheckpoint(*l.Checkpoint)
	}
	return nil
}

// epochDue reports whether an evolving key's epoch has run out at t.
// Called with w.mu held.
func (w *Writer) epochDue(t time.Time) bool {
	if w.sign == nil || w.opts.Epoch < 0 || w.sign.Mode() != KeyEvolving {
		return false
	}
	e := w.opts.Epoch
	if e == 0 {
		e = DefaultEpoch
	}
	return t.Sub(w.epochAt) >= e
}

// fill completes the checkpoint of l, a checkpoint line being queued,
// and signs it: the chain head is the link the line carries (the last
// line, or for a restart the last checkpoint's line), the count every
// line queued before it. It then switches to the next epoch's key, when
// it certified one. Called with w.mu held.
func (w *Writer) fill(l *Line) {
	c := l.Checkpoint
	c.Node, c.Time = w.opts.Node, l.Time.UTC()
	l.Node, l.Time = c.Node, c.Time
	c.Seq, c.Count, c.Head, c.Prev = w.seq+1, w.count, string(w.prev), w.cpHash
	c.Certs, c.Abandoned = w.certs, w.abandon
	l.Event = EventCheckpoint
	if c.Abandoned != nil {
		l.Event = EventRestart
	}
	s := w.sign
	s.mu.Lock()
	c.Epoch = s.epoch
	if m, ok := c.message(); ok {
		copy(c.Sig[:], signWith(s, m))
	}
	s.mu.Unlock()
	w.seq, w.cpHash, w.certs, w.abandon = c.Seq, c.Hash(), nil, nil
	if l.evo != nil {
		s.commit(l.evo)
		w.epochAt = l.evo.cert.Since
		l.evo = nil
	}
}
