package proxy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/incusspawn/isx/internal/isx/instance"
)

// Routes: a process in an instance that is told a provider's base URL can
// use the proxy as that provider, over plain HTTP on the instance's
// loopback, sending the instance secret as its API key (the proxy checks
// it and puts the account's credential in its place).
const (
	// AnthropicRoute answers as https://api.anthropic.com.
	AnthropicRoute = "/anthropic"
	// OpenAIRoute answers as https://api.openai.com.
	OpenAIRoute = "/openai"
)

// ProxyUser is the user name of the proxy URL; its password is the
// instance secret.
const ProxyUser = "isx"

// Base URLs of the routes, as seen from inside an instance.
var (
	AnthropicBaseURL = "http://" + instance.ProxyAddress + AnthropicRoute
	OpenAIBaseURL    = "http://" + instance.ProxyAddress + OpenAIRoute + "/v1"
)

// AgentEnvironment is the environment an agent process in an instance
// needs to reach everything through the host proxy with the instance's
// current secret (read from instance.SecretFile at the process's start):
//
//   - ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY (Claude Code, Pi's and
//     opencode's Anthropic providers), OPENAI_BASE_URL and OPENAI_API_KEY
//     (Codex: model_providers.<p>.base_url and env_key): the routes, with
//     the secret as the key;
//   - HTTPS_PROXY, HTTP_PROXY (and lowercase) with the secret as the proxy
//     password, NO_PROXY for the loopback: git, package managers, and a
//     client that addresses the providers by their real names, whose TLS
//     the proxy terminates with its CA;
//   - SSL_CERT_FILE, GIT_SSL_CAINFO, CURL_CA_BUNDLE, REQUESTS_CA_BUNDLE
//     (the instance's bundle plus the proxy's CA) and NODE_EXTRA_CA_CERTS
//     (the proxy's CA, which Node adds to its own).
//
// No credential is in it: the secret proves who is calling and is worth
// nothing outside this instance's current start.
func AgentEnvironment(secret string) map[string]string {
	proxyURL := fmt.Sprintf("http://%s:%s@%s", ProxyUser, secret, instance.ProxyAddress)
	env := map[string]string{
		"ANTHROPIC_BASE_URL":   AnthropicBaseURL,
		"ANTHROPIC_API_KEY":    secret,
		"OPENAI_BASE_URL":      OpenAIBaseURL,
		"OPENAI_API_KEY":       secret,
		"HTTPS_PROXY":          proxyURL,
		"HTTP_PROXY":           proxyURL,
		"https_proxy":          proxyURL,
		"http_proxy":           proxyURL,
		"NO_PROXY":             "localhost,127.0.0.1,::1",
		"no_proxy":             "localhost,127.0.0.1,::1",
		"SSL_CERT_FILE":        instance.TrustFile,
		"GIT_SSL_CAINFO":       instance.TrustFile,
		"CURL_CA_BUNDLE":       instance.TrustFile,
		"REQUESTS_CA_BUNDLE":   instance.TrustFile,
		"NODE_EXTRA_CA_CERTS":  instance.CAFile,
		instance.SecretFileEnv: instance.SecretFile,
	}
	return env
}

// secretPlaceholder stands for the secret in ShellEnvironment.
const secretPlaceholder = "@@ISX_SECRET@@"

// ShellEnvironment is AgentEnvironment as POSIX shell: it reads the secret
// from instance.SecretFile when it runs, so a script run at any start of
// the instance gets that start's secret. It exports nothing when the file
// is missing (an instance the proxy has not prepared).
func ShellEnvironment() string {
	env := AgentEnvironment(secretPlaceholder)
	var b strings.Builder
	fmt.Fprintf(&b, "if [ -r %s ]; then\n", instance.SecretFile)
	fmt.Fprintf(&b, "  isx_secret=$(cat %s)\n", instance.SecretFile)
	for _, name := range slices.Sorted(maps.Keys(env)) {
		value := strings.ReplaceAll(env[name], secretPlaceholder, "${isx_secret}")
		fmt.Fprintf(&b, "  export %s=\"%s\"\n", name, value)
	}
	b.WriteString("  unset isx_secret\nfi\n")
	return b.String()
}

// profile is the script the proxy writes to instance.ProfileFile.
func profile() string {
	return "# Written by the isx host proxy at every start of this instance:\n" +
		"# everything goes out through the proxy, with this start's secret.\n" +
		ShellEnvironment()
}
