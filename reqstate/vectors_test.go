package reqstate

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the current code (a wire format change must also bump Version)")

// vector is one frozen known answer: fixed key, randomness, binding and
// state, and the token the codec must produce for them.
type vector struct {
	Name      string   `json:"name"`
	KeyID     string   `json:"key_id"`
	Secret    string   `json:"secret"`    // standard base64
	RandSeed  string   `json:"rand_seed"` // countingReader seed: nonce, then jti
	Binding   Binding  `json:"binding"`
	Round     int      `json:"round"`
	IssuedAt  string   `json:"issued_at"`  // RFC 3339
	ExpiresAt string   `json:"expires_at"` // RFC 3339
	FlowID    string   `json:"flow_id"`    // base64url
	Arguments string   `json:"arguments"`  // JSON text, hashed with HashArguments
	ArgsHash  string   `json:"args_hash"`  // expected, base64url
	Asked     []string `json:"asked"`
	Cont      string   `json:"continuation"` // JSON text, byte-exact
	JTI       string   `json:"jti"`          // expected, base64url
	Token     string   `json:"token"`        // expected
}

func vectorInputs() []vector {
	return []vector{
		{Name: "deploy round 1", KeyID: "2026-11", RandSeed: "vector-1",
			Binding: Binding{Method: "tools/call", ProtocolVersion: "2026-07-28", Target: "deploy", ServerID: "mrtr", Principal: Principal{Issuer: "https://id.example", Subject: "alice"}},
			Round:   1, IssuedAt: "2026-11-30T08:00:00Z", ExpiresAt: "2026-11-30T08:05:00Z",
			Arguments: `{"service":"api","env":"production"}`, Asked: []string{"confirm"},
			Cont: `{"service":"api","env":"production"}`},
		{Name: "anonymous prompt, no continuation", KeyID: "k", RandSeed: "vector-2",
			Binding: Binding{Method: "prompts/get", ProtocolVersion: "2026-07-28", Target: "test_input_required_result_prompt", ServerID: "s"},
			Round:   3, IssuedAt: "2026-11-30T08:00:00.123Z", ExpiresAt: "2026-11-30T08:01:00.123Z"},
		{Name: "resource with unicode and several keys", KeyID: "rot_2", RandSeed: "vector-3",
			Binding: Binding{Method: "resources/read", ProtocolVersion: "2025-11-25", Target: "file:///tmp/ä b.txt", ServerID: "node\x00a", Principal: Principal{Subject: "bob"}},
			Round:   10, IssuedAt: "2026-01-01T00:00:00Z", ExpiresAt: "2026-01-01T00:00:01Z",
			Arguments: `{"z":[1e21,-0,0.1],"a":"☃"}`, Asked: []string{"guess", "user_name", ""},
			Cont: `{"secret":42,"hints":["higher","lower"],"note":"ü\u0000"}`},
	}
}

func (v *vector) state(t *testing.T) (*State, Key) {
	t.Helper()
	k := Key{ID: v.KeyID}
	for i := range k.Secret {
		k.Secret[i] = byte(len(v.Name) + i*7)
	}
	if v.Secret != "" {
		raw, err := base64.StdEncoding.DecodeString(v.Secret)
		if err != nil || len(raw) != KeySize {
			t.Fatalf("%s: bad secret in vector", v.Name)
		}
		copy(k.Secret[:], raw)
	}
	iat, err1 := time.Parse(time.RFC3339Nano, v.IssuedAt)
	exp, err2 := time.Parse(time.RFC3339Nano, v.ExpiresAt)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: bad times", v.Name)
	}
	h, err := HashArguments([]byte(v.Arguments))
	if err != nil {
		t.Fatal(err)
	}
	var flow ID
	if v.FlowID != "" {
		raw, err := base64.RawURLEncoding.DecodeString(v.FlowID)
		if err != nil || len(raw) != len(flow) {
			t.Fatalf("%s: bad flow id", v.Name)
		}
		copy(flow[:], raw)
	} else {
		flow = ID([]byte(strings.Repeat(v.Name, 16))[:16])
	}
	var cont json.RawMessage
	if v.Cont != "" {
		cont = json.RawMessage(v.Cont)
	}
	return &State{Continuation: cont, Round: v.Round, IssuedAt: iat.UTC(), ExpiresAt: exp.UTC(),
		FlowID: flow, ArgsHash: h, Asked: v.Asked}, k
}

func TestKnownAnswerVectors(t *testing.T) {
	path := filepath.Join("testdata", "vectors.json")
	if *update {
		var out []vector
		for _, v := range vectorInputs() {
			s, k := v.state(t)
			tok, err := New(testRing(t, k), &Options{Rand: &countingReader{seed: v.RandSeed}}).Seal(v.Binding, s)
			if err != nil {
				t.Fatal(err)
			}
			v.Secret = base64.StdEncoding.EncodeToString(k.Secret[:])
			v.FlowID = s.FlowID.String()
			v.ArgsHash = s.ArgsHash.String()
			v.JTI = s.JTI.String()
			v.Token = tok
			out = append(out, v)
		}
		data, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(vectorInputs()) {
		t.Fatalf("%d vectors in %s, want %d (run with -update after adding one)", len(vs), path, len(vectorInputs()))
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			s, k := v.state(t)
			if s.ArgsHash.String() != v.ArgsHash {
				t.Fatalf("arguments hash %s, frozen %s", s.ArgsHash, v.ArgsHash)
			}
			ring := testRing(t, k)
			// Sealing the same inputs with the same randomness gives the frozen token.
			tok, err := New(ring, &Options{Rand: &countingReader{seed: v.RandSeed}}).Seal(v.Binding, s)
			if err != nil {
				t.Fatal(err)
			}
			if tok != v.Token || s.JTI.String() != v.JTI {
				t.Fatalf("wire format changed:\n got %s\nwant %s\n(bump Version, then run go test -run KnownAnswer -update)", tok, v.Token)
			}
			// The frozen token opens to the same state.
			got, err := New(ring, nil).Open(v.Binding, v.Token)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !reflect.DeepEqual(got, s) {
				t.Fatalf("opened state:\n got %+v\nwant %+v", got, s)
			}
		})
	}
}
