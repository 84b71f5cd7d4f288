//go:build !race

package conn_test

const raceEnabled = false
