// Package proxy is the isx host proxy: one process per host user through
// which instances reach model providers, package sources and git hosts.
// It knows an instance by the unix socket its request arrives on (the
// instance's Incus proxy device connects to a socket of its own) together
// with the secret it writes into the instance at every start; it injects
// the credential of the account the instance's template names and removes
// whatever credential the instance sent, so credentials never enter an
// instance; and it counts, per instance incarnation, the model calls and
// every other request (the activity counters of instance_activity and
// `isx proxy activity`). Its control API (a unix socket only the user can
// reach) answers status, activity, admission and stop.
//
// It is not a general-purpose proxy: it serves isx instances of its own
// host user in one Incus project, and refuses everything else.
package proxy
