//go:build !race

package zkrace

// Enabled reports whether the binary runs under the race detector.
const Enabled = false
