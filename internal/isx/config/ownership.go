package config

import "github.com/incusspawn/isx/internal/fileowner"

// isx's secrets (accounts.yaml, the route secrets) are checked by the
// rules actiond's database is; config keeps the names its callers use.
type (
	Owner       = fileowner.Owner
	UnsafeError = fileowner.UnsafeError
)

// CurrentOwner is the user this process runs as.
func CurrentOwner() Owner { return fileowner.CurrentOwner() }
