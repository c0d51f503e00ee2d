package mcpgo

// RaceEnabled tells the external tests whether the race detector is on:
// it drops pooled items at random and changes allocation counts.
const RaceEnabled = raceEnabled
