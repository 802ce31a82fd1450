package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// ACT-583: the default server lists the skills basics, design, verify,
// actions, agents and mcp as resources and as prompts, through the go-sdk
// client at every revision; each SKILL.md has its examples and names only
// tools the server offers.
func TestDefaultServerSkills(t *testing.T) {
	want := []string{"basics", "design", "verify", "actions", "agents", "mcp"}
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		env := at.New(t, d, at.Options{})
		for _, rev := range at.Revisions {
			t.Run(rev, func(t *testing.T) {
				ctx := context.Background()
				client := env.Connect("default", env.Token(server.LocalPrincipal, "alice"), rev)
				tools, err := client.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				offered := map[string]bool{}
				for _, tool := range tools.Tools {
					offered[tool.Name] = true
				}
				prompts, err := client.ListPrompts(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, p := range prompts.Prompts {
					names = append(names, p.Name)
				}
				if !slices.Equal(names, want) {
					t.Errorf("prompts %v", names)
				}
				resources, err := client.ListResources(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(resources.Resources) != len(want) {
					t.Fatalf("resources %s", at.AsJSON(resources))
				}
				for i, r := range resources.Resources {
					if r.URI != "skill://v1/"+want[i]+"/SKILL.md" {
						t.Errorf("resource %d: %s", i, r.URI)
					}
					read, err := client.ReadResource(ctx, &mcp.ReadResourceParams{URI: r.URI})
					if err != nil {
						t.Fatal(err)
					}
					text := read.Contents[0].Text
					if !strings.HasPrefix(text, "---\nname: "+want[i]+"\n") || !strings.Contains(text, "## Examples") || strings.Count(text, "**Situation:**") < 2 {
						t.Errorf("%s:\n%s", r.URI, text)
					}
					_, tools, _ := strings.Cut(text, "## Tools\n")
					for _, line := range strings.Split(strings.TrimSpace(tools), "\n") {
						name, _, _ := strings.Cut(strings.TrimPrefix(line, "- `"), "`")
						if !offered[name] {
							t.Errorf("%s names %q, which the server does not offer", r.URI, name)
						}
					}
				}
				prompt, err := client.GetPrompt(ctx, &mcp.GetPromptParams{Name: "basics"})
				if err != nil {
					t.Fatal(err)
				}
				if text := prompt.Messages[0].Content.(*mcp.TextContent).Text; !strings.Contains(text, "audit") {
					t.Errorf("the basics prompt:\n%s", text)
				}
			})
		}
	})
}
