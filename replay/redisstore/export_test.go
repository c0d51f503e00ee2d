package redisstore

import "time"

// SetTimeout changes s's Options.Timeout, for a test whose calls that must
// succeed get a long one and whose calls to a frozen server a short one.
// No call may run on s meanwhile.
func SetTimeout(s *Store, d time.Duration) { s.setTimeout(d) }
