// Package auth decides who is calling actiond: it verifies bearer JWTs
// against configured issuers (JWKS over HTTP or inline), runs actiond's own
// local issuer, and provides the HTTP pieces of OAuth-protected MCP
// endpoints: bearer extraction, the 401 challenge and Protected Resource
// Metadata (RFC 9728).
//
// Signing in is out of scope. On the platform a person signs in on the
// console's own page, with its MFA, and the MCP host gets its token (and
// refresh token) from there; the console is the authorization server the
// Protected Resource Metadata names. actiond is a local server: its local
// issuer only mints tokens for the operator (`actiond token`) and publishes
// the keys and the minimal RFC 8414 metadata needed to verify them. It has no
// authorization, token or sign-in endpoint, so an MCP host cannot complete an
// interactive sign-in against it; configure the host with a minted token
// instead.
package auth
