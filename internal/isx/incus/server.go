package incus

import (
	"context"
	"slices"
)

// Server describes the daemon, as GET /1.0 answers.
type Server struct {
	APIVersion    string            `json:"api_version"`
	APIExtensions []string          `json:"api_extensions"`
	Auth          string            `json:"auth"`
	Config        map[string]string `json:"config"`
	Environment   ServerEnvironment `json:"environment"`
}

// ServerEnvironment is the part of Server that names the host and versions.
type ServerEnvironment struct {
	ServerName    string   `json:"server_name"`
	ServerVersion string   `json:"server_version"`
	Kernel        string   `json:"kernel"`
	KernelVersion string   `json:"kernel_version"`
	Driver        string   `json:"driver"`
	Storage       string   `json:"storage"`
	Architectures []string `json:"architectures"`
}

// HasExtension reports whether the daemon supports the named API extension.
func (s *Server) HasExtension(name string) bool { return slices.Contains(s.APIExtensions, name) }

// Server returns the daemon's description. It is the cheapest request that
// proves the daemon answers.
func (c *Client) Server(ctx context.Context) (*Server, error) {
	var s Server
	if _, err := c.get(ctx, request{method: "GET", path: "/1.0", global: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
