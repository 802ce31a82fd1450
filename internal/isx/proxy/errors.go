package proxy

// Codes of the proxy's errors: machine-readable and stable.
const (
	// CodeState: the proxy's directory, its CA or its record of instance
	// secrets cannot be used.
	CodeState = "proxy_state"
	// CodeRunning: another proxy already serves this host user.
	CodeRunning = "proxy_running"
	// CodeNotRunning: no proxy answers on the control socket.
	CodeNotRunning = "proxy_not_running"
	// CodeStartFailed: a proxy was started but did not come up.
	CodeStartFailed = "proxy_start_failed"
	// CodeNotServed: the proxy does not serve that instance (airgapped,
	// not an isx instance, another user's, stopped, or without the proxy
	// device).
	CodeNotServed = "not_served"
	// CodeControl: the control API answered with an error.
	CodeControl = "proxy_control"
)
