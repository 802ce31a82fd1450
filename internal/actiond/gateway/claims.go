package gateway

import "github.com/incusspawn/isx/internal/actiond/policy"

// identityClaims are the claims every request's record keeps: who issued
// the token, for whom and which client, its audience, its times, the
// principal and accounts it names, and its scope. A replay evaluates the
// original principal's policies with the claims recorded here.
var identityClaims = []string{"iss", "sub", "aud", "exp", "iat", "nbf", "client_id", "azp", "principal", "accounts", "scope"}

// replayClaims is what a request records of its token's claims: the
// identity claims, and the claims the policies it runs under read (the
// principal's, the server's and its tools' assertions). Everything else a
// token carries, such as an outside identity provider's email, name or
// phone number, is left out of the record.
func replayClaims(claims map[string]any, server *Server) map[string]any {
	if len(claims) == 0 {
		return nil
	}
	var lists [][]policy.Policy
	for _, layer := range server.Layers {
		lists = append(lists, layer.Policies)
	}
	lists = append(lists, server.Definition.Policies)
	for _, tool := range server.Tools {
		if tool.Compiled != nil {
			lists = append(lists, tool.Compiled.Definition().Policies)
		}
	}
	read, all := policy.ClaimsRead(lists...)
	if all {
		return claims
	}
	kept := make(map[string]any, len(identityClaims)+len(read))
	for _, name := range identityClaims {
		if v, ok := claims[name]; ok {
			kept[name] = v
		}
	}
	for name := range read {
		if v, ok := claims[name]; ok {
			kept[name] = v
		}
	}
	return kept
}
