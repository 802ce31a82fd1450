package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/isx/instance"
)

// Completions read the template definitions and ask Incus; where either
// fails they offer what they have, and never print a warning, which would
// land in the person's shell.

// completionTimeout bounds what a completion asks of Incus: a shell must
// not hang on a daemon that is down.
const completionTimeout = 3 * time.Second

// noFiles ends every completion: isx takes no file names.
const noFiles = cobra.ShellCompDirectiveNoFileComp

// completeTemplates offers the defined templates not named yet.
func (a *app) completeTemplates(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	a.quiet = true
	set, err := a.templates()
	if err != nil || set == nil {
		return nil, noFiles
	}
	var out []string
	for _, d := range set.Definitions() {
		if strings.HasPrefix(d.Name, prefix) && !slices.Contains(args, d.Name) {
			out = append(out, d.Name+"\t"+describe(d.Description, "template"))
		}
	}
	return out, noFiles
}

// completeBranchSource offers what isx branch --from takes: the built
// templates and the instances isx made.
func (a *app) completeBranchSource(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	return a.completeEntries(cmd, prefix, func(e instance.Entry) (string, bool) {
		if e.Stamps.IsTemplate() {
			return "built template", true
		}
		return "instance of " + orDash(e.Stamps.Template), e.Stamps.Managed()
	}), noFiles
}

// completeInstances offers the instances isx made, and the built templates
// too once --template is given, leaving out the names already given.
func (a *app) completeInstances(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	templates, _ := cmd.Flags().GetBool("template")
	return a.completeEntries(cmd, prefix, func(e instance.Entry) (string, bool) {
		switch {
		case slices.Contains(args, e.Name):
			return "", false
		case e.Stamps.IsTemplate():
			return "built template", templates
		}
		return strings.ToLower(e.Status) + ", from " + orDash(e.Stamps.Template), e.Stamps.Type == instance.TypeInstance
	}), noFiles
}

// completeInstance offers one instance, for commands taking one.
func (a *app) completeInstance(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, noFiles
	}
	return a.completeInstances(cmd, args, prefix)
}

// completeEntries lists the project's instances; offer says whether to
// offer one, and how to describe it.
func (a *app) completeEntries(cmd *cobra.Command, prefix string, offer func(instance.Entry) (string, bool)) []string {
	a.quiet = true
	client, err := a.incus()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
	defer cancel()
	entries, err := (&instance.Manager{Client: client}).List(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name, prefix) {
			continue
		}
		if description, ok := offer(e); ok {
			out = append(out, e.Name+"\t"+description)
		}
	}
	return out
}

// completeProjects offers Incus's projects.
func (a *app) completeProjects(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	a.quiet = true
	client, err := a.incus()
	if err != nil {
		return nil, noFiles
	}
	ctx, cancel := context.WithTimeout(completionContext(cmd), completionTimeout)
	defer cancel()
	projects, err := client.Projects(ctx)
	if err != nil {
		return nil, noFiles
	}
	var out []string
	for _, p := range projects {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name+"\t"+describe(p.Description, "project"))
		}
	}
	return out, noFiles
}

func completionContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// describe is a completion's description: its first line, or what it is.
func describe(text, otherwise string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	if line == "" {
		return otherwise
	}
	return line
}
