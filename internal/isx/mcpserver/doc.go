// Package mcpserver is the `isx mcp` server: the Model Context Protocol over
// stdio for an agent on the host (seeds 000 and 001), and over Streamable
// HTTP for a coordinator instance. It is the tool surface only: each tool's
// definition beside its handler, one file per family: templates.go
// (list_templates), instances.go (list_instances), create.go
// (create_instance), handover.go (adopt_instance, keep_instance),
// lifecycle.go (destroy_instance, stop_instance, start_instance), exec.go,
// tasks.go (task_status, task_result, cancel_task, wait_any), delegate.go
// (delegate, send_message), diff.go (get_diff) and activity.go
// (instance_activity); ask.go answers the ask of exec, task_result and
// get_diff, notify.go sends task_changed.
//
// What an agent gets is narrow: only templates mcp.yaml approves that are
// trusted and built, their defaults only, and only instances of the host
// user that its own session holds. mcp.yaml is read on every call and
// never written. Which session holds an instance, how holding changes
// hands, the limits across sessions and the orphan sweep are the domain of
// internal/isx/holding, which this package calls; every stamp is named in
// internal/isx/instance. Every call is recorded in the audit log.
package mcpserver
