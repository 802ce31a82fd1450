package incus

import (
	"context"
	"fmt"
	"net/url"
)

// Project is an Incus project: a namespace for instances (and, depending on
// its features.* config, for images, profiles, volumes and networks).
type Project struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Config      map[string]string `json:"config"`
	UsedBy      []string          `json:"used_by,omitempty"`
}

// Projects lists every project with its config.
func (c *Client) Projects(ctx context.Context) ([]Project, error) {
	var projects []Project
	r := request{method: "GET", path: apiPath("projects"), global: true, query: url.Values{"recursion": {"1"}}}
	if _, err := c.get(ctx, r, &projects); err != nil {
		return nil, fmt.Errorf("listing projects: %w", err)
	}
	return projects, nil
}

// GetProject returns one project and its ETag.
func (c *Client) GetProject(ctx context.Context, name string) (*Project, string, error) {
	var p Project
	etag, err := c.get(ctx, request{method: "GET", path: apiPath("projects", name), global: true}, &p)
	if err != nil {
		return nil, "", fmt.Errorf("getting project %q: %w", name, err)
	}
	return &p, etag, nil
}

// CreateProject creates a project; one that exists already is ErrConflict.
func (c *Client) CreateProject(ctx context.Context, p Project) error {
	body := struct {
		Name        string            `json:"name"`
		Description string            `json:"description,omitempty"`
		Config      map[string]string `json:"config,omitempty"`
	}{p.Name, p.Description, p.Config}
	if _, err := c.run(ctx, request{method: "POST", path: apiPath("projects"), global: true, body: body}); err != nil {
		return fmt.Errorf("creating project %q: %w", p.Name, err)
	}
	return nil
}

// DeleteProject deletes an empty project (delete its instances first).
func (c *Client) DeleteProject(ctx context.Context, name string) error {
	if _, err := c.run(ctx, request{method: "DELETE", path: apiPath("projects", name), global: true}); err != nil {
		return fmt.Errorf("deleting project %q: %w", name, err)
	}
	return nil
}
