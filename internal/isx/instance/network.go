package instance

import (
	"maps"
	"slices"
	"sort"
)

// Network is how an instance reaches the network.
type Network string

const (
	// NetworkDefault gives the instance its profile's network.
	NetworkDefault Network = "default"
	// NetworkProxyOnly lets the instance out only through the host proxy.
	NetworkProxyOnly Network = "proxy-only"
	// NetworkAirgap gives the instance no network at all.
	NetworkAirgap Network = "airgap"
)

// Networks lists the modes, in the order the CLI documents them.
var Networks = []Network{NetworkDefault, NetworkProxyOnly, NetworkAirgap}

// ParseNetwork accepts a mode's name; "" is NetworkDefault.
func ParseNetwork(s string) (Network, error) {
	if s == "" {
		return NetworkDefault, nil
	}
	n := Network(s)
	if !slices.Contains(Networks, n) {
		return "", NewError(CodeInvalid, "", nil, "%q is not a network mode; use default, proxy-only or airgap", s)
	}
	return n, nil
}

// networkDevices are the devices a new instance gets for its network mode,
// given the devices it would otherwise have (its source's expanded
// devices, profiles included). Airgap and proxy-only mask every NIC with a
// device of the same name and type none, so no profile can hand one back.
// Default and proxy-only get the proxy device to the host proxy of
// proxyDir (none when proxyDir is ""); airgap never does, and a copy of
// an instance gets a device of its own in place of its source's.
func networkDevices(mode Network, proxyDir, project, name string, inherited map[string]map[string]string) (map[string]map[string]string, error) {
	devices := map[string]map[string]string{}
	if mode != NetworkDefault {
		for _, device := range nicNames(inherited) {
			devices[device] = map[string]string{"type": "none"}
		}
	}
	_, hasProxy := inherited[ProxyDevice]
	// A copy of a coordinator never keeps its way to isx mcp.
	if _, ok := inherited[CoordinatorDevice]; ok {
		devices[CoordinatorDevice] = map[string]string{"type": "none"}
	}
	switch {
	case mode != NetworkAirgap && proxyDir != "":
		extra, err := proxyDevices(proxyDir, project, name)
		if err != nil {
			return nil, err
		}
		maps.Copy(devices, extra)
	case hasProxy:
		devices[ProxyDevice] = map[string]string{"type": "none"}
	}
	if len(devices) == 0 {
		return nil, nil
	}
	return devices, nil
}

// proxyEnvironment is the config that tells processes of an instance
// connected to the host proxy where its secret is.
func proxyEnvironment(mode Network, proxyDir string) map[string]string {
	if mode == NetworkAirgap || proxyDir == "" {
		return nil
	}
	return map[string]string{"environment." + SecretFileEnv: SecretFile}
}

// nicNames lists the devices of type nic, sorted.
func nicNames(devices map[string]map[string]string) []string {
	var names []string
	for name, device := range devices {
		if device["type"] == "nic" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// HasNIC reports whether any of the devices (an instance's expanded
// devices) is a network interface.
func HasNIC(devices map[string]map[string]string) bool {
	return len(nicNames(devices)) > 0
}
