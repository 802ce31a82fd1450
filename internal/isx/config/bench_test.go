package config

import "testing"

// LoadMCP runs on every MCP call; these measure what that costs.

func BenchmarkLoadMCP(b *testing.B) {
	home := b.TempDir()
	writeMCP(b, home, seedMCP)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadMCP(home); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadMCPMissing(b *testing.B) {
	home := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadMCP(home); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadMCPInvalid(b *testing.B) {
	home := b.TempDir()
	writeMCP(b, home, seedMCP+"max-instancs: 3\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadMCP(home); err == nil {
			b.Fatal("no error")
		}
	}
}

// BenchmarkMCPStatus is the other per-call read: config.yaml's old section.
func BenchmarkMCPStatus(b *testing.B) {
	home := b.TempDir()
	writeMCP(b, home, seedMCP)
	writeConfig(b, home, "project: default\ntemplate-paths: [~/t]\ndefault-template: tpl-dev\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MCPStatus(home); err != nil {
			b.Fatal(err)
		}
	}
}
