package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// Completions read the database the command line names (or the default
// one); where there is none they offer nothing rather than fail.

// completionLimit bounds how many IDs a completion offers.
const completionLimit = 200

func completeExecutions(f *recordFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fromDatabase(cmd.Context(), f, func(ctx context.Context, st *store.Store) []string {
			var ids []string
			_ = st.Read(ctx, func(tx *store.Tx) error {
				for _, role := range []string{store.RoleRequest, store.RoleRefusal} {
					list, err := tx.Executions(ctx, store.ExecutionFilter{Account: f.account, Role: role})
					if err != nil {
						return err
					}
					for _, e := range list {
						if strings.HasPrefix(e.ID, prefix) {
							ids = append(ids, e.ID+"\t"+e.ActionName+" "+requestRow(e).Method)
						}
					}
				}
				return nil
			})
			return latest(ids)
		})
	}
}

func completeSessions(f *recordFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return fromDatabase(cmd.Context(), f, func(ctx context.Context, st *store.Store) []string {
			rows, _ := readSessions(ctx, st, f.account, "")
			var ids []string
			for _, r := range rows {
				if strings.HasPrefix(r.ID, prefix) {
					ids = append(ids, r.ID+"\t"+r.Server)
				}
			}
			return latest(ids)
		})
	}
}

func completeServers(f *recordFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return fromDatabase(cmd.Context(), f, func(ctx context.Context, st *store.Store) []string {
			actions, _ := registry.Actions(ctx, st.NewWork(f.account), "", 0)
			var names []string
			for _, a := range actions {
				if a.Definition.Kind == action.KindMCP && strings.HasPrefix(a.Definition.Name, prefix) {
					names = append(names, a.Definition.Name)
				}
			}
			return names
		})
	}
}

func fromDatabase(ctx context.Context, f *recordFlags, read func(context.Context, *store.Store) []string) ([]string, cobra.ShellCompDirective) {
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := f.db.openExisting(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer st.Close()
	return read(ctx, st), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

func latest(ids []string) []string {
	if len(ids) > completionLimit {
		return ids[len(ids)-completionLimit:]
	}
	return ids
}
