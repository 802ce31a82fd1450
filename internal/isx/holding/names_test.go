package holding

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// ISX-040, ISX-043: names are mcp-<template without tpl->-<hint>-<suffix>,
// within Incus's 63 characters; a key's suffix is stable, a random one is
// five of a-z2-7.
func TestInstanceNames(t *testing.T) {
	long := "tpl-" + strings.Repeat("a", 36)
	name := instanceName(long, strings.Repeat("h", 16), "abcde")
	if len(name) > 63 || incus.ValidateInstanceName(name) != nil || !strings.HasSuffix(name, "-hhhhhhhhhhhhhhhh-abcde") {
		t.Errorf("long name %q (%d)", name, len(name))
	}
	if got := instanceName("tpl-dev", "870-impl", "x2y3z"); got != "mcp-dev-870-impl-x2y3z" {
		t.Errorf("name %q", got)
	}
	if keySuffix("u", "k") != keySuffix("u", "k") || keySuffix("u", "k") == keySuffix("v", "k") {
		t.Error("key suffixes are not per owner and key")
	}
	suffix, err := randomSuffix(bytes.NewReader([]byte{1, 2, 3, 4}))
	if err != nil || !regexp.MustCompile(`^[a-z2-7]{5}$`).MatchString(suffix) {
		t.Errorf("suffix %q, %v", suffix, err)
	}
}
