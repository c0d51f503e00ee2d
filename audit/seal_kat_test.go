package audit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"github.com/mrtr-go/mrtr/reqstate"
)

// TestSealKnownAnswers pins the bytes the sealing signs and derives,
// with frozen vectors: FILE.pub's key of a fixed seed (the bytes 0 to
// 31), the key of the next epoch, the key derived from the fixed ring
// key, a certification and a checkpoint (their signed bytes' SHA-256,
// their Ed25519 signatures, the checkpoint's Hash). A change to any of
// them makes every sealed trail written so far fail to verify. The values
// were checked against an independent computation (Python's hashlib,
// hmac and the cryptography package's Ed25519).
func TestSealKnownAnswers(t *testing.T) {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(i)
	}
	s := &Signer{mode: KeyEvolving}
	s.setSeed(seed)
	s.pub0 = s.pub
	h := sha256.Sum256(append([]byte(evolveLabel), seed...))
	next := ed25519.NewKeyFromSeed(h[:])
	var pub1 PublicKey
	copy(pub1[:], next.Public().(ed25519.PublicKey))
	ring, _ := reqstate.NewKeyRing(katKey())
	rp, err := RingPublicKey(ring, "k1")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	c := Cert{Epoch: 1, Pub: pub1, Since: at, Seq: 2}
	copy(c.Sig[:], ed25519.Sign(s.priv, c.message()))
	link := func(s string) string {
		x := sha256.Sum256([]byte(s))
		return base64.RawURLEncoding.EncodeToString(x[:])
	}
	cp := Checkpoint{Node: "n1", Seq: 2, Count: 5, Head: link("x"), Time: at.Add(time.Second), Prev: link("y"), Epoch: 0, Next: &c, Final: true}
	m, ok := cp.message()
	if !ok {
		t.Fatal("message")
	}
	copy(cp.Sig[:], ed25519.Sign(s.priv, m))
	sum := func(b []byte) string { x := sha256.Sum256(b); return hex.EncodeToString(x[:]) }
	for _, v := range []struct{ name, got, want string }{
		{"FILE.pub", s.pub0.String(), "ed25519:A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"},
		{"epoch 1 key", pub1.String(), "ed25519:yEr9ZfArDnjTV7JMSYt94Jy24MJm84p3gOfBKT2WXNg"},
		{"ring-derived key", rp.String(), "ed25519:WFm09ii2UJA7P0orx08ucPP__v4Wig0BT97HdNSQp-g"},
		{"cert bytes", sum(c.message()), "1ecddd78ed453397ab65ff7140f6606458f1c239c0e4a22b83c25778293013b8"},
		{"cert sig", hex.EncodeToString(c.Sig[:]), "d27a29a2f8158d0f958f32e02c744d5149b6f90bc05ea09afb5cd6fc3faeca5f31b013d7a47fe86db4db50887b5aef9c993e49853d1376bfe2ad9d84a204b502"},
		{"checkpoint bytes", sum(m), "bc2675355dcc66228ee5a7ec35936c2ca8e9289202141ccfdc38ac570eca3990"},
		{"checkpoint sig", hex.EncodeToString(cp.Sig[:]), "0cbb2c484d45393ce927f2c1fa35f8726139288c11d9a557ba6f01fdaac48fa813af2759b11d95a78740346ac8eb0c501193559c42b85c2886606f5346ba0102"},
		{"checkpoint hash", cp.Hash(), "VHkgbS1xnGyBoYsEeCgPtWJCQ0g98yI93zLxrsXWf4o"},
	} {
		if v.got != v.want {
			t.Errorf("%s = %s, want %s", v.name, v.got, v.want)
		}
	}
	if !cp.checkBy(s.pub0) || !c.checkBy(s.pub0) {
		t.Fatal("the vectors do not verify")
	}
}
