package embed

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/carmyhq/carmy/engine"
)

// EffectsConfig is a tool's policy keys (docs/policy.md): effects (once,
// idempotent or read_only; once when empty) and retry_uncertain (which
// needs idempotent).
type EffectsConfig struct {
	Effects        string `yaml:"effects"`
	RetryUncertain bool   `yaml:"retry_uncertain"`
	// Approval gates the tool behind a person's decision
	// (docs/policy.md#approval-gates).
	Approval *ApprovalConfig `yaml:"approval"`
}

// ApprovalConfig is a tool's approval key: required (must be true),
// approvers (principals; none: the admin alone), expires_after (a Go
// duration, default 1h), notify (a webhook told of each call awaiting
// approval: an http or https url, ${VAR} expanded, under the tool's
// egress policy).
type ApprovalConfig struct {
	Required     bool     `yaml:"required"`
	Approvers    []string `yaml:"approvers"`
	ExpiresAfter string   `yaml:"expires_after"`
	Notify       *struct {
		URL string `yaml:"url"`
	} `yaml:"notify"`
}

// parse checks the keys and returns the gate they set (nil: none),
// expanding ${VAR} in notify.url from getenv; allow is the tool's egress
// policy (nil: any address outside the deny list), which the url's host
// must pass when it is an IP address. An error never repeats the url's
// userinfo or query.
func (ac *ApprovalConfig) parse(getenv func(string) string, allow []netip.Prefix) (*engine.Approval, error) {
	if ac == nil {
		return nil, nil
	}
	if !ac.Required {
		return nil, fmt.Errorf("approval.required: must be true when approval is given (remove the approval key to run the tool without one)")
	}
	var notify *engine.ApprovalNotify
	if ac.Notify != nil {
		if ac.Notify.URL == "" {
			return nil, fmt.Errorf("approval.notify.url: needs a url")
		}
		u, err := expand(ac.Notify.URL, getenv)
		if err != nil {
			return nil, fmt.Errorf("approval.notify.url: %w", err)
		}
		notify = &engine.ApprovalNotify{URL: u, AllowNetworks: allow}
		if err := notify.Check(); err != nil {
			return nil, err
		}
	}
	a := &engine.Approval{Approvers: slices.Clone(ac.Approvers), ExpiresAfter: engine.DefaultApprovalExpiry, Notify: notify}
	for i, p := range a.Approvers {
		if p == "" {
			return nil, fmt.Errorf("approval.approvers[%d]: empty principal", i)
		}
	}
	if ac.ExpiresAfter != "" {
		d, err := time.ParseDuration(ac.ExpiresAfter)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("approval.expires_after %q: want a positive duration such as 1h", ac.ExpiresAfter)
		}
		a.ExpiresAfter = d
	}
	return a, nil
}

// parse checks the keys and returns the effects they set.
func (ec EffectsConfig) parse() (engine.Effects, error) {
	e, err := engine.ParseEffects(ec.Effects)
	if err != nil {
		return "", err
	}
	if ec.RetryUncertain && e != engine.EffectsIdempotent {
		return "", fmt.Errorf("retry_uncertain: true needs effects: idempotent (effects is %s)", e)
	}
	if ec.Approval != nil && e == engine.EffectsReadOnly {
		return "", fmt.Errorf("approval: a read_only tool is never reserved, so it cannot await a decision")
	}
	return e, nil
}

// MCPToolsConfig is an MCP server's tools key: either a list of the
// upstream tools served, or a map from each tool served to its settings
// (effects, retry_uncertain; an empty or null value sets none). Nil
// serves every tool. It is read from the file (UnmarshalYAML) only.
type MCPToolsConfig struct {
	names    []string
	settings map[string]EffectsConfig
}

// UnmarshalYAML accepts the list form or the map form.
func (m *MCPToolsConfig) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		m.names = []string{}
		return n.Decode(&m.names)
	case yaml.MappingNode:
		m.names, m.settings = []string{}, map[string]EffectsConfig{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			var name string
			if err := n.Content[i].Decode(&name); err != nil {
				return err
			}
			var ec EffectsConfig
			if v := n.Content[i+1]; v.Tag != "!!null" {
				if v.Kind != yaml.MappingNode {
					return fmt.Errorf("line %d: tools.%s: want a map such as {effects: read_only}", v.Line, name)
				}
				// Unknown keys are refused, as everywhere in the file.
				if err := decodeStrictNode(v, &ec); err != nil {
					return fmt.Errorf("tools.%s: %w", name, err)
				}
			}
			m.names = append(m.names, name)
			m.settings[name] = ec
		}
		return nil
	}
	return fmt.Errorf("line %d: tools: want a list of tool names or a map of them to their settings", n.Line)
}

// decodeStrictNode decodes n into v, refusing keys v does not have.
func decodeStrictNode(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// list returns the tools served (nil: every one).
func (m *MCPToolsConfig) list() []string {
	if m == nil {
		return nil
	}
	return slices.Clone(m.names)
}

// approvals returns the approval gates the map form sets, by upstream
// tool name; getenv and allow as ApprovalConfig.parse's (allow: the
// server's egress policy).
func (m *MCPToolsConfig) approvals(getenv func(string) string, allow []netip.Prefix) (map[string]*engine.Approval, error) {
	if m == nil || m.settings == nil {
		return nil, nil
	}
	out := map[string]*engine.Approval{}
	for name, ec := range m.settings {
		a, err := ec.Approval.parse(getenv, allow)
		if err != nil {
			return nil, fmt.Errorf("tools.%s: %w", name, err)
		}
		if a != nil {
			out[name] = a
		}
	}
	return out, nil
}

// effects returns the effects and the retry_uncertain flags the map form
// sets, by upstream tool name.
func (m *MCPToolsConfig) effects() (map[string]engine.Effects, map[string]bool, error) {
	if m == nil || m.settings == nil {
		return nil, nil, nil
	}
	effects, retry := map[string]engine.Effects{}, map[string]bool{}
	for name, ec := range m.settings {
		if ec.Effects == "" && !ec.RetryUncertain {
			continue // the tool is served; its effects are the default's (or its trusted annotations')
		}
		e, err := ec.parse()
		if err != nil {
			return nil, nil, fmt.Errorf("tools.%s: %w", name, err)
		}
		effects[name], retry[name] = e, ec.RetryUncertain
	}
	return effects, retry, nil
}
