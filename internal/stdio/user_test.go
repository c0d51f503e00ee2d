package stdio

import (
	"errors"
	"os/user"
	"slices"
	"strconv"
	"testing"
)

// TestLookupUser: USER[:GROUP] by name or id; refused unless root, for
// root itself, and for what does not resolve.
func TestLookupUser(t *testing.T) {
	if _, err := LookupUser("nobody", 1000); !errors.Is(err, ErrNotRoot) {
		t.Fatalf("as uid 1000: %v, want ErrNotRoot", err)
	}
	u, err := LookupUser("65534:65534", 0)
	if err != nil || u.Uid != 65534 || u.Gid != 65534 {
		t.Fatalf("65534:65534 = %+v, %v", u, err)
	}
	if u, err := LookupUser("4000000:4000001", 0); err != nil || u.Uid != 4000000 || u.Gid != 4000001 || len(u.Groups) != 0 {
		t.Fatalf("ids without a passwd entry = %+v, %v", u, err)
	}
	if nb, err := user.Lookup("nobody"); err == nil {
		u, err := LookupUser("nobody", 0)
		if err != nil || nb.Uid != itoa(u.Uid) || nb.Gid != itoa(u.Gid) {
			t.Fatalf("nobody = %+v, %v; passwd says %s:%s", u, err, nb.Uid, nb.Gid)
		}
		gids, _ := nb.GroupIds()
		var want []uint32
		for _, g := range gids {
			id, _ := parseID(g)
			want = append(want, id)
		}
		if !slices.Equal(u.Groups, want) {
			t.Errorf("nobody's groups = %v, want %v", u.Groups, want)
		}
		if u, err := LookupUser("nobody:0", 0); err != nil || u.Gid != 0 {
			t.Errorf("nobody:0 = %+v, %v", u, err)
		}
	}
	for _, bad := range []string{"", ":", "nobody:", ":65534", "root", "0:65534", "4000000", "mrtr-no-such-user", "nobody:mrtr-no-such-group"} {
		if u, err := LookupUser(bad, 0); err == nil {
			t.Errorf("LookupUser(%q) = %+v, want an error", bad, u)
		}
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
