package build

import "testing"

// A template built by an older isx is stale; these are the orderings that
// decide "older".
func TestOlderVersion(t *testing.T) {
	cases := []struct {
		stamped, running string
		older            bool
	}{
		{"0.1.0", "0.1.0", false},
		{"0.1.0-dev", "0.1.0-dev", false},
		{"0.0.9", "0.1.0", true},
		{"0.1.0-dev", "0.1.0", true}, // a prerelease precedes its release
		{"0.1.0", "0.1.0-dev", false},
		{"0.2.0", "0.1.0", false}, // a newer isx's build is not stale
		{"1.2", "1.2.0", false},
		{"v1.2.3", "1.2.3", false},
		{"1.2.3+build5", "1.2.3", false},
		{"1.0.0-alpha", "1.0.0-alpha.1", true},
		{"1.0.0-alpha.1", "1.0.0-alpha.beta", true},
		{"1.0.0-beta.2", "1.0.0-beta.11", true}, // numeric identifiers compare as numbers
		{"1.0.0-rc.1", "1.0.0", true},
		{"", "0.1.0", true},        // unstamped: cannot be trusted to be current
		{"garbage", "0.1.0", true}, // unparsable: the same
		{"1.10.0", "1.9.0", false},
	}
	for _, c := range cases {
		older, err := OlderVersion(c.stamped, c.running)
		if err != nil {
			t.Fatalf("OlderVersion(%q, %q): %v", c.stamped, c.running, err)
		}
		if older != c.older {
			t.Errorf("OlderVersion(%q, %q) = %v, want %v", c.stamped, c.running, older, c.older)
		}
	}
	if _, err := OlderVersion("0.1.0", "not-a-version"); err == nil {
		t.Errorf("an unparsable running version is not reported")
	}
}

func TestEtcEnvironmentKeepsOtherLines(t *testing.T) {
	current := "PATH=\"/usr/bin:/bin\"\n" + envBegin + "\nOLD=\"x\"\n" + envEnd + "\nLANG=C\n"
	got := etcEnvironment(current, []string{"A", "B", "C"}, map[string]string{"A": "1", "B": "two words", "C": "multi\nline"})
	want := "PATH=\"/usr/bin:/bin\"\nLANG=C\n" + envBegin + "\nA=\"1\"\nB=\"two words\"\n" + envEnd + "\n"
	if got != want {
		t.Errorf("etcEnvironment:\n%s\nwant:\n%s", got, want)
	}
	if got := profileScript([]string{"Q"}, map[string]string{"Q": "it's"}); got != "# Written by isx build from the template's env.\nexport Q='it'\\''s'\n" {
		t.Errorf("profileScript quoted wrongly: %q", got)
	}
}
