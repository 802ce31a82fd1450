package main

import (
	"os"

	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/incus"
)

// socketSetting is the Incus socket isx dials and what chose it.
type socketSetting struct {
	path string
	// origin is envSocket, originConfig, or "" for the default.
	origin string
}

// originConfig is config.yaml's socket: setting.
const originConfig = "config.yaml"

// socketSetting is INCUS_SOCKET, else config.yaml's socket, else the
// default.
func (a *app) socketSetting(cfg *config.Config) socketSetting {
	if s := os.Getenv(envSocket); s != "" {
		return socketSetting{path: s, origin: envSocket}
	}
	if cfg.Socket != "" {
		return socketSetting{path: cfg.Socket, origin: originConfig}
	}
	return socketSetting{path: incus.DefaultSocketPath}
}

// socket is the path of socketSetting.
func (a *app) socket(cfg *config.Config) string { return a.socketSetting(cfg).path }

// named is the setting as a person finds it.
func (s socketSetting) named() string { return s.prefix() + s.path }

func (s socketSetting) prefix() string {
	switch s.origin {
	case envSocket:
		return envSocket + "="
	case originConfig:
		return "config.yaml's socket: "
	}
	return "the default socket "
}

// options make the client's error for a socket that is not there name
// the setting that chose it, and say what to do: a wrong setting rather
// than a daemon that is down, which the client says of the default socket.
func (s socketSetting) options() []incus.Option {
	switch s.origin {
	case envSocket:
		return []incus.Option{incus.WithSocketSetting(s.prefix(), "unset "+envSocket+" to use config.yaml's socket (or the default "+incus.DefaultSocketPath+"), or set it to the socket the Incus daemon listens on")}
	case originConfig:
		return []incus.Option{incus.WithSocketSetting(s.prefix(), "run `isx init --socket PATH` with the socket the Incus daemon listens on (the default is "+incus.DefaultSocketPath+")")}
	}
	return nil
}
