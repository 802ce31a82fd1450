// Package testkit is what the tests of both programs share and nothing
// else may use (the walls test keeps it out of every package that is not
// a test or a test kit): golden files, a buffer a test reads while a
// process writes it, and the median of timed benchmark iterations.
package testkit
