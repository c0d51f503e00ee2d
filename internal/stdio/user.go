package stdio

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// User is the identity a child runs as (Config.User): its user id, its
// group id and its supplementary groups. Setting one needs the proxy to
// run as root.
type User struct {
	Uid, Gid uint32
	Groups   []uint32 // supplementary groups; empty means none
}

// ErrNotRoot is LookupUser's error when the process is not root: only
// root can start a process as another user.
var ErrNotRoot = errors.New("running the command as another user needs the proxy to run as root")

// LookupUser resolves USER or USER:GROUP, each a name or a numeric id, as
// the identity to run a child as: the user's id, GROUP's id or else the
// user's primary group, and the user's supplementary groups from the
// system's group database. A numeric user without a passwd entry needs
// its group given, and gets no supplementary groups. euid is the
// process's effective user id (os.Geteuid()): anything but 0 is
// ErrNotRoot. The user must not be root (uid 0): that would not change
// who the child runs as.
func LookupUser(spec string, euid int) (*User, error) {
	if euid != 0 {
		return nil, ErrNotRoot
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	if name == "" || (hasGroup && group == "") {
		return nil, fmt.Errorf("%q is not USER or USER:GROUP", spec)
	}
	var u User
	uu, err := lookupUser(name)
	switch {
	case err == nil:
		id, err := parseID(uu.Uid)
		if err != nil {
			return nil, fmt.Errorf("user %s: uid %q: %w", name, uu.Uid, err)
		}
		u.Uid = id
		if u.Gid, err = parseID(uu.Gid); err != nil {
			return nil, fmt.Errorf("user %s: gid %q: %w", name, uu.Gid, err)
		}
		gids, err := uu.GroupIds()
		if err != nil {
			return nil, fmt.Errorf("user %s: its groups: %w", name, err)
		}
		for _, g := range gids {
			id, err := parseID(g)
			if err != nil {
				return nil, fmt.Errorf("user %s: group id %q: %w", name, g, err)
			}
			u.Groups = append(u.Groups, id)
		}
	case isNumeric(name) && hasGroup:
		if u.Uid, err = parseID(name); err != nil {
			return nil, fmt.Errorf("user %s: %w", name, err)
		}
	default:
		return nil, fmt.Errorf("user %s: %w", name, err)
	}
	if hasGroup {
		g, err := lookupGroup(group)
		switch {
		case err == nil:
			if u.Gid, err = parseID(g.Gid); err != nil {
				return nil, fmt.Errorf("group %s: gid %q: %w", group, g.Gid, err)
			}
		case isNumeric(group):
			if u.Gid, err = parseID(group); err != nil {
				return nil, fmt.Errorf("group %s: %w", group, err)
			}
		default:
			return nil, fmt.Errorf("group %s: %w", group, err)
		}
	}
	if u.Uid == 0 {
		return nil, fmt.Errorf("user %s is root: name an unprivileged user", name)
	}
	return &u, nil
}

// lookupUser finds a user by name, or by id when name is numeric.
func lookupUser(name string) (*user.User, error) {
	if isNumeric(name) {
		return user.LookupId(name)
	}
	return user.Lookup(name)
}

// lookupGroup finds a group by name, or by id when name is numeric.
func lookupGroup(name string) (*user.Group, error) {
	if isNumeric(name) {
		return user.LookupGroupId(name)
	}
	return user.LookupGroup(name)
}

func isNumeric(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, errors.New("not a numeric id")
	}
	return uint32(n), nil
}
