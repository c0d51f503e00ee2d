package stdio

import (
	"slices"
	"strings"
	"testing"
)

func TestEnviron(t *testing.T) {
	for _, tt := range []struct {
		name          string
		parent, extra []string
		want          []string
		err           string // substring of the error, "" for none
	}{
		{name: "empty"},
		{
			name:   "parent kept",
			parent: []string{"PATH=/bin", "HOME=/root", "EMPTY="},
			want:   []string{"PATH=/bin", "HOME=/root", "EMPTY="},
		},
		{
			name:   "MRTR_ dropped",
			parent: []string{"MRTR_KEYS=k1:secret", "PATH=/bin", "MRTR_=x", "MRTR_BEARER=t", "XMRTR_A=1", "mrtr_lower=1", "MRTR_NOVALUE"},
			want:   []string{"PATH=/bin", "XMRTR_A=1", "mrtr_lower=1"},
		},
		{
			name:   "extra appended and overrides",
			parent: []string{"A=1", "B=2", "A=3"},
			extra:  []string{"B=x", "C=y=z", "D="},
			want:   []string{"A=1", "A=3", "B=x", "C=y=z", "D="},
		},
		{
			name:  "later extra wins",
			extra: []string{"A=1", "B=2", "A=3"},
			want:  []string{"B=2", "A=3"},
		},
		{
			name:   "explicit MRTR_ allowed",
			parent: []string{"MRTR_TTL=5m", "MRTR_KEYS=k1:secret"},
			extra:  []string{"MRTR_TTL=1m"},
			want:   []string{"MRTR_TTL=1m"},
		},
		{name: "key ring refused", extra: []string{"A=1", "MRTR_KEYS=k1:sekrit"}, err: "entry 2: MRTR_KEYS"},
		{name: "no equals", extra: []string{"sekrit"}, err: "entry 1 is not NAME=VALUE"},
		{name: "empty name", extra: []string{"=sekrit"}, err: "entry 1 has an empty name"},
		{name: "NUL in name", extra: []string{"A\x00B=sekrit"}, err: "NUL"},
		{name: "NUL in value", extra: []string{"A=sek\x00rit"}, err: "entry 1 (A): its value contains a NUL byte"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			parent := slices.Clone(tt.parent)
			extra := slices.Clone(tt.extra)
			got, err := Environ(parent, extra)
			if !slices.Equal(parent, tt.parent) || !slices.Equal(extra, tt.extra) {
				t.Error("Environ modified its arguments")
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Environ = %q, %v; want error containing %q", got, err, tt.err)
				}
				if strings.Contains(err.Error(), "sek") {
					t.Errorf("error %q shows a value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Environ = %q, want %q", got, tt.want)
			}
		})
	}
}
