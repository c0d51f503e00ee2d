//go:build race

package gosdk

const raceEnabled = true
