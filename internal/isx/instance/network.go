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
func networkDevices(mode Network, name string, inherited map[string]map[string]string) (map[string]map[string]string, error) {
	if mode == NetworkDefault {
		return nil, nil
	}
	devices := map[string]map[string]string{}
	for _, device := range nicNames(inherited) {
		devices[device] = map[string]string{"type": "none"}
	}
	if mode == NetworkProxyOnly {
		extra, err := proxyOnlyDevices(name)
		if err != nil {
			return nil, err
		}
		maps.Copy(devices, extra)
	}
	return devices, nil
}

// proxyOnlyDevices are the devices that connect a proxy-only instance to
// the host proxy. Until the host proxy exists there are none, so a
// proxy-only instance is as cut off as an airgapped one; the host proxy
// adds its Incus proxy device here.
func proxyOnlyDevices(instance string) (map[string]map[string]string, error) {
	return nil, nil
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
