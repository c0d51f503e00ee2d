//go:build race

package mcpgo

const raceEnabled = true
