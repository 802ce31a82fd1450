package spelling

import "testing"

func TestNearest(t *testing.T) {
	known := []string{"tpl-dev", "tpl-java", "tpl-test-busybox", "tpl-test-busybox-child"}
	for word, want := range map[string]string{
		"tpl-deb":               "tpl-dev",  // a substitution
		"tpl-dve":               "tpl-dev",  // a swap
		"tpl-jav":               "tpl-java", // a deletion
		"tpl-test-busybox-chil": "tpl-test-busybox-child",
		"tpl-test-busybx":       "tpl-test-busybox",
		"tpl-dev":               "", // known: nothing to suggest
		"web":                   "", // too far from all
		"tpl-python":            "",
		"":                      "",
	} {
		if got := Nearest(word, known); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"abc", "abd", 1}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"tpl-dev", "tpl-dev", 0}} {
		if got := distance(c.a, c.b); got != c.want {
			t.Errorf("distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
