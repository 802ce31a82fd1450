package gateway

// Protocol revisions the endpoint serves. 2024-11-05 is refused.
var supportedVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}

// serves says whether the server answers a method at a protocol revision.
// Every server answers discovery, tools and the Tasks extension; resources,
// prompts and skills come with skills and resource templates (a later
// issue). server/discover exists from 2026-07-28 on, and the handshake
// (initialize, ping) only before it: the other revision's method is refused
// here with the fixed -32601, not left to the SDK's own wording.
func (s *Server) serves(method, version string) bool {
	switch method {
	case "tools/list", "tools/call", "tasks/get", "tasks/update", "tasks/cancel":
		return true
	case "server/discover":
		return version >= newProtocol
	case "initialize", "ping":
		return version < newProtocol
	}
	return false
}
