//go:build !race

package zklock

// raceDetector reports whether the tests run under the race detector.
const raceDetector = false
