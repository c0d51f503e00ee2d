//go:build !race

package gosdk

const raceEnabled = false
