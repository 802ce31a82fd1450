package incus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// MetadataTemplate is one entry of an instance's metadata.yaml templates:
// a file Incus renders from Template (a pongo2 template kept with the
// instance) at the events named in When ("create", "copy", "start").
type MetadataTemplate struct {
	When       []string          `json:"when"`
	CreateOnly bool              `json:"create_only"`
	Template   string            `json:"template"`
	Properties map[string]string `json:"properties"`
}

// SetMetadataTemplates adds templates to an instance's metadata: each
// entry of files is a template file (by its name) and its content, each
// of entries says which file inside the instance a template renders.
// Entries the instance had for other paths stay; the metadata's other
// fields are sent back as Incus gave them.
func (c *Client) SetMetadataTemplates(ctx context.Context, instance string, files map[string]string, entries map[string]MetadataTemplate) error {
	path := apiPath("instances", instance, "metadata")
	var metadata map[string]json.RawMessage
	etag, err := c.get(ctx, request{method: "GET", path: path}, &metadata)
	if err != nil {
		return fmt.Errorf("reading the metadata of %q: %w", instance, err)
	}
	templates := map[string]MetadataTemplate{}
	if raw := metadata["templates"]; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &templates); err != nil {
			return fmt.Errorf("decoding the metadata templates of %q: %w", instance, err)
		}
	}
	for name, content := range files {
		if err := c.putTemplateFile(ctx, instance, name, content); err != nil {
			return err
		}
	}
	for file, entry := range entries {
		templates[file] = entry
	}
	encoded, err := json.Marshal(templates)
	if err != nil {
		return fmt.Errorf("encoding the metadata templates of %q: %w", instance, err)
	}
	if metadata == nil {
		metadata = map[string]json.RawMessage{}
	}
	metadata["templates"] = encoded
	if _, err := c.get(ctx, request{method: "PUT", path: path, body: metadata, etag: etag}, nil); err != nil {
		return fmt.Errorf("writing the metadata of %q: %w", instance, err)
	}
	return nil
}

// putTemplateFile writes (or replaces) one template file of the instance.
func (c *Client) putTemplateFile(ctx context.Context, instance, name, content string) error {
	r := request{
		method: "POST",
		path:   apiPath("instances", instance, "metadata", "templates"),
		query:  url.Values{"path": {name}},
		body:   strings.NewReader(content),
		header: http.Header{"Content-Type": {"application/octet-stream"}},
	}
	if _, err := c.get(ctx, r, nil); err != nil {
		return fmt.Errorf("writing the template file %s of %q: %w", name, instance, err)
	}
	return nil
}
