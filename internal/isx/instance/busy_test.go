package instance

import (
	"errors"
	"testing"

	"github.com/incusspawn/isx/internal/isx/incus"
)

// A create Incus refuses because an instance of the name is busy is
// another caller's instance, whichever operation it is busy with: the
// other caller's create, or the start that follows it. CI once saw the
// second ("start"), which was taken for a failed create of our own; the
// Incus-backed race is mcpserver's TestOneKeyManySessionsISX159.
func TestBusyWithAnyOperationMeansTheNameIsTaken(t *testing.T) {
	for _, operation := range []string{"create", "start"} {
		err := incus.NewOperationError("op", "Creating instance", 400, `Failed creating instance record: Instance is busy running a "`+operation+`" operation`)
		if !busyCreating(err) {
			t.Errorf("busy with %q was not seen as the name being taken", operation)
		}
	}
	if busyCreating(errors.New("incus: Creating instance failed: no space left on device")) || busyCreating(nil) {
		t.Error("another failure was seen as the name being taken")
	}
}
