package build

import (
	"context"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// TemplateStatus says whether a template is built and whether that build
// is still current.
type TemplateStatus struct {
	Built bool
	// Stale: the definition (or a parent's, or the root image tarball)
	// changed since the build, or an older isx built it.
	Stale  bool
	Reason string // why it is stale or not built; "" when current
	// Instance is the built template instance, when Built.
	Instance *incus.Instance
}

// Status reads the template instance named name and compares its stamps
// with the definition in set.
func Status(ctx context.Context, c *incus.Client, set *template.Set, name string) (TemplateStatus, error) {
	inst, _, err := c.GetInstance(ctx, name)
	if errors.Is(err, incus.ErrNotFound) {
		inst, err = nil, nil
	}
	if err != nil {
		return TemplateStatus{}, err
	}
	return StatusOf(inst, set, name)
}

// StatusOf is Status for an instance already read (nil when there is
// none), so that a listing costs one request to Incus.
func StatusOf(inst *incus.Instance, set *template.Set, name string) (TemplateStatus, error) {
	// A template whose chain cannot be built (a parent no source defines,
	// a cycle) is invalid, not merely unbuilt: its definition is what to
	// fix. A built one is checked below, through its definition's hash.
	if inst == nil || !instance.ParseStamps(inst.Config).IsTemplate() {
		if _, err := set.Chain(name); err != nil {
			return TemplateStatus{}, err
		}
	}
	if inst == nil {
		return TemplateStatus{Reason: fmt.Sprintf("not built; run `isx build %s`", name)}, nil
	}
	stamps := instance.ParseStamps(inst.Config)
	if !stamps.IsTemplate() {
		return TemplateStatus{Reason: fmt.Sprintf("not built: instance %s is not a template isx built", name)}, nil
	}
	status := TemplateStatus{Built: true, Instance: inst}
	want, err := DefinitionHash(set, name)
	var buildErr *Error
	switch {
	case errors.As(err, &buildErr) && buildErr.Code == CodeImageUnreadable:
		status.Stale, status.Reason = true, buildErr.Error()
		return status, nil
	case err != nil:
		return status, err
	}
	if stamps.DefinitionHash != want {
		status.Stale = true
		status.Reason = fmt.Sprintf("its definition changed since it was built; run `isx build %s`", name)
		return status, nil
	}
	older, err := OlderVersion(stamps.Version, Version)
	if err != nil {
		return status, err
	}
	if older {
		status.Stale = true
		built := stamps.Version
		if built == "" {
			built = "an unknown version"
		}
		status.Reason = fmt.Sprintf("isx %s built it, older than this isx %s; run `isx build %s`", built, Version, name)
	}
	return status, nil
}
