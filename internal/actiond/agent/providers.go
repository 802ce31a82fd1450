package agent

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
)

// Provider is a model provider as actiond's configuration names it. An
// agent's definition names a provider and a model; where the provider
// answers and with which key is only ever configuration, so a definition can
// neither redirect a model's traffic nor carry a credential.
type Provider struct {
	// Name is what agent.model.provider names.
	Name string `json:"name"`
	// API is APIAnthropic (the Messages API) or APIOpenAI (an
	// OpenAI-compatible chat completions API).
	API string `json:"api"`
	// BaseURL is where the API answers: https://api.anthropic.com for the
	// Messages API (requests go to <base>/v1/messages), a base ending in /v1
	// for a chat API (requests go to <base>/chat/completions).
	BaseURL string `json:"baseURL"`
	// APIKey is the key, or APIKeyEnv the environment variable holding it.
	APIKey    string `json:"apiKey,omitempty"`
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
}

// The APIs a provider can speak.
const (
	APIAnthropic = "anthropic"
	APIOpenAI    = "openai"
)

var configName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Providers are the configured providers, by name.
type Providers struct {
	models map[string]Model
}

// NewProviders checks the configured providers and makes their clients.
// Without one named anthropic or openai, the environment may define it:
// ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, OPENAI_BASE_URL and
// OPENAI_API_KEY, as those providers' own tools read them. getenv reads the
// environment (os.Getenv); client is the HTTP client every exchange uses.
func NewProviders(list []Provider, getenv func(string) string, client *http.Client) (*Providers, error) {
	if client == nil {
		client = &http.Client{}
	}
	p := &Providers{models: map[string]Model{}}
	named := map[string]bool{}
	for i, provider := range list {
		model, err := provider.client(getenv, client)
		if err != nil {
			return nil, fmt.Errorf("models[%d]: %w", i, err)
		}
		if named[provider.Name] {
			return nil, fmt.Errorf("models[%d]: a provider named %q is configured already", i, provider.Name)
		}
		named[provider.Name] = true
		p.models[provider.Name] = model
	}
	defaults := []struct{ name, baseVar, keyVar, base string }{
		{APIAnthropic, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "https://api.anthropic.com"},
		{APIOpenAI, "OPENAI_BASE_URL", "OPENAI_API_KEY", "https://api.openai.com/v1"},
	}
	for _, d := range defaults {
		base, key := getenv(d.baseVar), getenv(d.keyVar)
		if named[d.name] || base == "" && key == "" {
			continue
		}
		if base == "" {
			base = d.base
		}
		model, err := Provider{Name: d.name, API: d.name, BaseURL: base, APIKey: key}.client(getenv, client)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.baseVar, err)
		}
		p.models[d.name] = model
	}
	return p, nil
}

func (p Provider) client(getenv func(string) string, client *http.Client) (Model, error) {
	if !configName.MatchString(p.Name) {
		return nil, fmt.Errorf("%q is not a provider name: lowercase letters, digits, _ and -", p.Name)
	}
	if !strings.HasPrefix(p.BaseURL, "http://") && !strings.HasPrefix(p.BaseURL, "https://") {
		return nil, fmt.Errorf("provider %s: baseURL must be an http(s) URL, not %q", p.Name, p.BaseURL)
	}
	key := p.APIKey
	if p.APIKeyEnv != "" {
		if key != "" {
			return nil, fmt.Errorf("provider %s: give apiKey or apiKeyEnv, not both", p.Name)
		}
		key = getenv(p.APIKeyEnv)
		if key == "" {
			return nil, fmt.Errorf("provider %s: the environment variable %s is empty", p.Name, p.APIKeyEnv)
		}
	}
	switch p.API {
	case APIAnthropic:
		return &anthropic{baseURL: p.BaseURL, key: key, http: client}, nil
	case APIOpenAI:
		return &openAI{baseURL: p.BaseURL, key: key, http: client}, nil
	}
	return nil, fmt.Errorf("provider %s: api must be %s or %s, not %q", p.Name, APIAnthropic, APIOpenAI, p.API)
}

// Model is the client of a configured provider.
func (p *Providers) Model(provider string) (Model, error) {
	if p != nil {
		if model, ok := p.models[provider]; ok {
			return model, nil
		}
	}
	return nil, &ModelError{Base: coded.Base{Code: CodeModelNotConfigured,
		Message: fmt.Sprintf("No model provider named %q is configured on this actiond.", provider),
		Hint:    "Ask the operator to configure the provider under models: in actiond's configuration, or name one that is (" + p.names() + ")."}}
}

func (p *Providers) names() string {
	if p == nil || len(p.models) == 0 {
		return "none is configured"
	}
	names := make([]string, 0, len(p.models))
	for name := range p.models {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
