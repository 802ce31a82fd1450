// Package auth decides who is calling actiond: it verifies bearer JWTs
// against configured issuers (JWKS over HTTP or inline), runs actiond's own
// local issuer, and provides the HTTP pieces of OAuth-protected MCP
// endpoints: bearer extraction, the 401 challenge and Protected Resource
// Metadata (RFC 9728).
//
// Signing in is not here. On the platform a person signs in on the
// console's own page, with its MFA, and the console is the authorization
// server the Protected Resource Metadata names. Locally, package signin is
// that authorization server: it mints its access tokens with the local
// issuer, so they are verified exactly as `actiond token`'s are. Where the
// sign-in is not offered (a public URL that is not loopback), the local
// issuer publishes only its keys and minimal RFC 8414 metadata.
package auth
