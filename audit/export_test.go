package audit

// SetCertsPerLine sets how many certifications a line carries, for the
// tests of package audit_test, and returns a func that restores it.
func SetCertsPerLine(n int) (restore func()) {
	old := certsPerLine
	certsPerLine = n
	return func() { certsPerLine = old }
}
