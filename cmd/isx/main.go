// Command isx makes disposable Incus instances from templates: `isx init`
// sets it up, `isx build` builds templates, `isx branch` makes an
// instance from one, `isx list`, `isx shell` and `isx destroy` manage them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
