// Package mcpserver is the `isx mcp` server: the Model Context Protocol over
// stdio for an agent on the host (seeds 000 and 001). It serves the tools
// list_templates, list_instances, create_instance, adopt_instance,
// keep_instance, destroy_instance, stop_instance, start_instance, exec,
// task_status, task_result, cancel_task, wait_any, delegate, send_message,
// get_diff and instance_activity, one file per family (templates.go,
// instances.go, exec.go, tasks.go, delegate.go, diff.go, activity.go; ask.go
// answers the ask of exec, task_result and get_diff).
//
// What an agent gets is narrow: only templates mcp.yaml approves that are
// trusted and built, their defaults only, and only instances of the host
// user that its own session holds. mcp.yaml is read on every call and
// never written. Every instance is stamped (no side database): owner,
// holding session, purpose, caller, idempotency key, state; every key is
// named in internal/instance, and stamps.go reads them. A session's instances
// outlive it; Sweep, run by the next isx mcp to start, destroys orphans
// past their grace. Every call is recorded in the audit log.
package mcpserver
