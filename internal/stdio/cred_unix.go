//go:build unix

package stdio

import "syscall"

// credential is u as the child's credentials: its uid, gid and exactly
// its supplementary groups (none of root's are kept). Nil for nil.
func credential(u *User) *syscall.Credential {
	if u == nil {
		return nil
	}
	return &syscall.Credential{Uid: u.Uid, Gid: u.Gid, Groups: append([]uint32{}, u.Groups...)}
}
