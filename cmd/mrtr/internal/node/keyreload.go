package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mrtr-go/mrtr"
	"github.com/mrtr-go/mrtr/cmd/mrtr/internal/keyfile"
	"github.com/mrtr-go/mrtr/reqstate"
)

// defaultKeysPoll is how often a running server looks at its key file.
const defaultKeysPoll = 5 * time.Second

// openKeys returns the codec of serve and proxy over the configured key
// ring, and starts what reloads it without a restart: a poll of the key
// file every --keys-poll and SIGHUP. A key ring given inline in
// $MRTR_KEYS, or the ephemeral one, cannot be reloaded; SIGHUP then only
// logs that. stop ends the reloading.
func (c *CommonConfig) openKeys(ctx context.Context, log *slog.Logger, onSealWarn func(keyID string, seals uint64)) (codec *reqstate.AESGCM, ephemeral bool, stop func(), err error) {
	var rl *keyReloader
	var ring *reqstate.KeyRing
	if c.KeysFile != "" && c.KeysJSON == "" {
		rl = &keyReloader{path: c.KeysFile, log: log, now: time.Now}
		if ring, err = rl.initial(); err != nil {
			return nil, false, nil, keyfile.KeyFileHint(c.KeysFile, err)
		}
		if w := keyfile.KeyFileExposed(c.KeysFile); w != "" {
			log.Warn("mrtr " + w)
		}
	} else if ring, ephemeral, err = c.LoadKeys(); err != nil {
		return nil, false, nil, err
	}
	if _, ok := ring.SealingKey(time.Now()); !ok {
		return nil, false, nil, fmt.Errorf("key ring %s: no key may seal now: every key's window is closed (see mrtr keys status)", c.keysSource())
	}
	codec = reqstate.New(ring, &reqstate.Options{
		// A key keeps opening for as long as a token it sealed may be accepted.
		OpenGrace:  max(c.Ttl, c.AnonTTL) + mrtr.DefaultLeeway,
		SealWarn:   c.keySealWarn,
		OnSealWarn: onSealWarn,
		Logger:     log,
	})
	hup := make(chan os.Signal, 1)
	// Registered in every case: SIGHUP's default action would end the process.
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if rl != nil {
		rl.codec = codec
		wg.Go(func() { rl.run(ctx, c.keysPoll, hup) })
		log.Info("mrtr key ring reloads on change or SIGHUP", "file", c.KeysFile, "poll", c.keysPoll)
	} else {
		why := "the key ring is inline in $MRTR_KEYS: it cannot be reloaded; give a file (--keys FILE) to rotate without restarts"
		if ephemeral {
			why = "the key ring is ephemeral: it cannot be reloaded"
		}
		if !ephemeral {
			log.Info("mrtr " + why)
		}
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					log.Warn("mrtr key ring reload refused: " + why)
				}
			}
		})
	}
	return codec, ephemeral, func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
	}, nil
}

// keysSource names where the key ring comes from, for errors and logs.
func (c *CommonConfig) keysSource() string {
	switch {
	case c.KeysJSON != "":
		return "$MRTR_KEYS"
	case c.KeysFile != "":
		return c.KeysFile
	}
	return "(ephemeral)"
}

// keyReloader replaces a running codec's key ring when its file changes.
// A file that does not parse, whose keys cannot seal now, or that gives a
// known key id another secret is refused with a log line naming the file
// and the reason (never a secret), and the current ring stays.
type keyReloader struct {
	path  string
	codec *reqstate.AESGCM
	log   *slog.Logger
	now   func() time.Time

	// Only a file whose content is the ring in use is recorded as current
	// (stat and current): a refused file is not, so every poll reads it
	// again until it is fixed, even by a rewrite that keeps its size and
	// modification time, and SIGHUP refuses it again rather than calling
	// it unchanged.
	mu      sync.Mutex
	stat    fileStamp         // the file as last read with the content in use
	current [sha256.Size]byte // content of the ring in use
	refused [sha256.Size]byte // content last refused, logged once per poll
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// initial reads the ring the server starts with.
func (k *keyReloader) initial() (*reqstate.KeyRing, error) {
	data, st, err := k.read()
	if err != nil {
		return nil, fmt.Errorf("load key ring: %w", err)
	}
	defer clear(data)
	ring, err := reqstate.ParseKeyRing(data)
	if err != nil {
		return nil, fmt.Errorf("load key ring %s: %w", k.path, err)
	}
	k.stat, k.current = st, sha256.Sum256(data)
	return ring, nil
}

func (k *keyReloader) read() ([]byte, fileStamp, error) {
	f, err := os.Open(k.path)
	if err != nil {
		return nil, fileStamp{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, err
	}
	// Thousands of keys; a larger file is no key ring.
	const maxKeyFile = 1 << 20
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fileStamp{}, err
	}
	if len(data) > maxKeyFile {
		clear(data)
		return nil, fileStamp{}, fmt.Errorf("%s is larger than %d bytes: not a key ring", k.path, maxKeyFile)
	}
	return data, fileStamp{fi.Size(), fi.ModTime()}, nil
}

// run polls the file every interval and reloads on SIGHUP until ctx ends.
func (k *keyReloader) run(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.reload("poll")
		case <-hup:
			k.reload("SIGHUP")
		}
	}
}

// reload reads the file and installs its ring if it changed. A poll reads
// the file only when its size or modification time differs from the file
// the ring in use was read from (so, while a refused file is in place,
// every poll reads it); SIGHUP always reads it. It reports whether the
// ring was replaced.
func (k *keyReloader) reload(trigger string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	forced := trigger != "poll"
	if !forced {
		fi, err := os.Stat(k.path)
		if err == nil && (fileStamp{fi.Size(), fi.ModTime()}) == k.stat {
			return false
		}
	}
	data, st, err := k.read()
	if err != nil {
		// A missing file mid-replace is common (editors, configuration
		// managers); say it once per change and keep the ring.
		if forced || k.stat != (fileStamp{}) {
			k.refuse(trigger, err)
		}
		k.stat = fileStamp{}
		return false
	}
	defer clear(data)
	sum := sha256.Sum256(data)
	if sum == k.current {
		// Back to the ring in use: a refused content written again later
		// is a new mistake, said again.
		k.stat, k.refused = st, [sha256.Size]byte{}
		if forced {
			k.log.Info("mrtr key ring unchanged", "file", k.path, "trigger", trigger)
		}
		return false
	}
	// A refused file stays unrecorded (k.stat untouched): polls re-read it,
	// and say nothing while its content is the one refused.
	if sum == k.refused && !forced {
		return false
	}
	ring, err := reqstate.ParseKeyRing(data)
	if err == nil {
		if _, ok := ring.SealingKey(k.now()); !ok {
			err = fmt.Errorf("no key may seal now: every key's window is closed (see mrtr keys status)")
		}
	}
	old := k.codec.KeyRing()
	if err == nil {
		err = k.codec.SetKeyRing(ring)
	}
	if err != nil {
		k.refused = sum
		k.refuse(trigger, err)
		return false
	}
	k.stat, k.current, k.refused = st, sum, [sha256.Size]byte{}
	sealing, _ := ring.SealingKey(k.now())
	k.log.Info("mrtr key ring reloaded", "file", k.path, "trigger", trigger, "keys", ring.IDs(), "primary", sealing)
	if was, ok := old.SealingKey(k.now()); ok && !slices.Contains(ring.IDs(), was) {
		k.log.Warn("mrtr key ring reload dropped the key that was sealing: flows it paused can no longer resume; "+
			"keep a key in the ring for the longest TTL after it stops sealing", "file", k.path, "dropped", was)
	}
	return true
}

func (k *keyReloader) refuse(trigger string, err error) {
	k.log.Error("mrtr key ring reload refused; the current ring stays", "file", k.path, "trigger", trigger,
		"error", err.Error(), "keys", k.codec.KeyRing().IDs())
}

// sealWarnings returns the hook that counts --key-seal-warn warnings in
// mrtr_key_seal_warnings_total{key_id} (with --metrics-addr; nil
// otherwise), so an alert can fire on them. Key ids are the operator's,
// never a caller's: the label stays small.
func (t *Telemetry) sealWarnings() func(string, uint64) {
	if t == nil || t.Registry == nil {
		return nil
	}
	warned := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mrtr_key_seal_warnings_total",
		Help: "Warnings that one key has sealed --key-seal-warn tokens (and each further multiple) in this process: rotate it before all nodes together reach the AES-GCM random-nonce budget of 2^32 seals per key.",
	}, []string{"key_id"})
	t.Registry.MustRegister(warned)
	return func(kid string, _ uint64) { warned.WithLabelValues(kid).Inc() }
}
