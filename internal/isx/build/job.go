package build

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
)

// job is the build of one template.
type job struct {
	*Builder
	def      *template.Definition
	chain    []*template.Definition // parents first; the last is def
	instance string                 // the build instance
	suffix   string
	from     string // what the build instance was made from, for messages
	systemd  bool   // its init is systemd
}

func (j *job) root() bool { return j.def.Parent == "" }

// repos are the repositories the definition's own tools clone.
func (j *job) repos() []template.Repo {
	var out []template.Repo
	for _, t := range j.def.Tools {
		out = append(out, t.Repos...)
	}
	return out
}

// connect gives a build that clones repositories its way to the host
// proxy: the proxy device, and the stamps by which the proxy serves it
// with its template's accounts.
func (j *job) connect(create *incus.InstanceCreate) error {
	if len(j.repos()) == 0 {
		return nil
	}
	if j.Proxy == nil || j.ProxyDir == "" {
		return failure(CodeToolFailed, j.def.Name, nil, "its tools clone repositories, which goes through the host proxy, and this build has none (isx build starts it)")
	}
	devices, config, err := instance.BuildProxy(j.ProxyDir, j.Client.ProjectName(), j.instance)
	if err != nil {
		return err
	}
	source, err := j.Set.EffectiveSource(j.def.Name)
	if err != nil {
		return err
	}
	if create.Config == nil {
		create.Config = map[string]string{}
	}
	maps.Copy(create.Config, config)
	maps.Copy(create.Config, instance.Stamps{Type: instance.TypeBuild, Template: j.def.Name, Owner: j.Owner, Source: string(source), Network: instance.NetworkDefault}.Config())
	if create.Devices == nil {
		create.Devices = map[string]map[string]string{}
	}
	maps.Copy(create.Devices, devices)
	return nil
}

// createRequest makes the build instance from the root image or from a
// copy of the parent's template instance, without the parent's stamps.
func (j *job) createRequest(ctx context.Context) (incus.InstanceCreate, error) {
	create := incus.InstanceCreate{
		Name:        j.instance,
		Description: j.description(),
		Start:       true,
	}
	if j.root() {
		alias, err := j.imageAlias(ctx, j.def)
		if err != nil {
			return create, err
		}
		create.Source = incus.ImageSource(alias)
		j.from = "image " + alias
		return create, j.connect(&create)
	}
	parent, _, err := j.Client.GetInstance(ctx, j.def.Parent)
	if errors.Is(err, incus.ErrNotFound) {
		return create, failure(CodeParentNotBuilt, j.def.Name, nil, "its parent %s is not built; run `isx build --with-parents %s`", j.def.Parent, j.def.Name)
	}
	if err != nil {
		return create, err
	}
	if !instance.ParseStamps(parent.Config).IsTemplate() {
		return create, failure(CodeParentNotBuilt, j.def.Name, nil, "instance %s is not a template isx built, so it cannot be the parent; run `isx build --with-parents %s`", j.def.Parent, j.def.Name)
	}
	create.Source = incus.CopySource(j.def.Parent, true)
	create.Config = map[string]string{}
	for key := range parent.Config {
		if strings.HasPrefix(key, instance.Prefix) {
			create.Config[key] = ""
		}
	}
	j.from = "template " + j.def.Parent
	return create, j.connect(&create)
}

// run does everything after the build instance was made and booted.
func (j *job) run(ctx context.Context) error {
	if j.root() {
		if err := j.step(ctx, step{label: "create the agent user", script: agentScript}); err != nil {
			return err
		}
	}
	if err := j.installPackages(ctx); err != nil {
		return err
	}
	if err := j.writeFiles(ctx); err != nil {
		return err
	}
	if err := j.writeEnv(ctx); err != nil {
		return err
	}
	for i, s := range j.def.Run {
		label := s.Name
		if label == "" {
			label = firstLine(s.Run)
		}
		if err := j.step(ctx, step{label: label, index: i + 1, of: len(j.def.Run), script: s.Run, user: s.User}); err != nil {
			return err
		}
	}
	if err := j.installTools(ctx); err != nil {
		return err
	}
	if err := j.cloneRepos(ctx); err != nil {
		return err
	}
	return j.phase("stamp it as "+j.def.Name+", stop it and put it in place", func() error {
		if err := instance.NameHostOnCopy(ctx, j.Client, j.instance); err != nil {
			return failure(CodeBuildFailed, j.def.Name, err, "naming the host of the template's copies")
		}
		if err := j.stamp(ctx); err != nil {
			return err
		}
		if err := j.stop(ctx); err != nil {
			return err
		}
		return j.replace(ctx)
	})
}

// phase shows a part of the build that is isx's own work rather than a
// script (making and booting the build instance; stamping, stopping and
// renaming it) as a step, so that the seconds it takes are seen passing.
func (j *job) phase(label string, do func() error) error {
	shown := Step{Template: j.def.Name, Tag: step{}.tag(), Label: label}
	progress := j.progress()
	progress.StepStarted(shown)
	began := j.clock().Now()
	err := do()
	progress.StepEnded(shown, StepEnd{Took: j.clock().Now().Sub(began), Err: err})
	return err
}

// agentScript creates the agent user (uid and gid 1000, home /home/agent)
// when the image lacks it, with useradd where there is one and by editing
// the account files where there is not (busybox), and lets it use sudo
// without a password where sudo is installed.
const agentScript = `if ! id -u agent >/dev/null 2>&1; then
  shell=/bin/sh; [ -x /bin/bash ] && shell=/bin/bash
  if command -v useradd >/dev/null 2>&1; then
    useradd --create-home --home-dir /home/agent --uid 1000 --user-group --shell "$shell" agent
  else
    grep -q '^agent:' /etc/group 2>/dev/null || echo 'agent:x:1000:' >>/etc/group
    echo "agent:x:1000:1000:isx agent:/home/agent:$shell" >>/etc/passwd
    if [ -f /etc/shadow ]; then echo 'agent:!:19000:0:99999:7:::' >>/etc/shadow; fi
    mkdir -p /home/agent && chown 1000:1000 /home/agent && chmod 0755 /home/agent
  fi
fi
if [ "$(id -u agent)" != 1000 ] || [ "$(id -g agent)" != 1000 ]; then
  echo "the image has a user agent with uid:gid $(id -u agent):$(id -g agent); isx needs 1000:1000" >&2; exit 1
fi
if [ -d /etc/sudoers.d ]; then
  printf 'agent ALL=(ALL) NOPASSWD:ALL\n' >/etc/sudoers.d/isx-agent && chmod 0440 /etc/sudoers.d/isx-agent
fi`

// installPackages installs the template's own packages with apt-get. It
// refuses at once, with a clear message, when the build instance has no
// network interface: apt-get would only time out.
func (j *job) installPackages(ctx context.Context) error {
	if len(j.def.Packages) == 0 {
		return nil
	}
	inst, _, err := j.Client.GetInstance(ctx, j.instance)
	if err != nil {
		return err
	}
	if !instance.HasNIC(inst.ExpandedDevices) {
		return failure(CodeNeedsNetwork, j.def.Name, nil, "lists packages (%s), which need network access, but the build instance has no network interface (the default profile of project %s gives it none); add a nic to the default profile, or install the packages into the image instead",
			strings.Join(j.def.Packages, ", "), j.projectName())
	}
	script := "command -v apt-get >/dev/null || { echo 'packages need apt-get, which this image lacks' >&2; exit 1; }\n" +
		"export DEBIAN_FRONTEND=noninteractive\n" +
		"apt-get update\n" +
		"apt-get install -y --no-install-recommends " + strings.Join(j.def.Packages, " ") + "\n" +
		"apt-get clean"
	return j.step(ctx, step{label: "install packages: " + strings.Join(j.def.Packages, " "), script: script})
}

// writeFiles writes the template's files with their mode and owner,
// creating missing directories.
func (j *job) writeFiles(ctx context.Context) error {
	for _, f := range j.def.Files {
		opts := incus.FileOptions{Mode: 0o644, MakeParents: true}
		if f.HasMode {
			opts.Mode = f.Mode
		}
		if f.Owner == template.UserAgent {
			opts.UID, opts.GID = AgentUID, AgentGID
		}
		if err := j.Client.PushFile(ctx, j.instance, f.Path, strings.NewReader(f.Content), opts); err != nil {
			return failure(CodeBuildFailed, j.def.Name, err, "writing %s", f.Path)
		}
		j.line("    wrote %s", f.Path)
	}
	return nil
}

// projectName is the Incus project the build works in.
func (b *Builder) projectName() string {
	if p := b.Client.ProjectName(); p != "" {
		return p
	}
	return "default"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(line) > 60 {
		line = line[:57] + "..."
	}
	return line
}

// mergedEnv is the environment of the whole chain, a child's value
// winning over its parent's.
func (j *job) mergedEnv() map[string]string {
	env := map[string]string{}
	for _, d := range j.chain {
		maps.Copy(env, d.Env)
	}
	return env
}

// description is the template instance's Incus description.
func (j *job) description() string {
	if j.def.Description != "" {
		return "isx template " + j.def.Name + ": " + j.def.Description
	}
	return "isx template " + j.def.Name
}
