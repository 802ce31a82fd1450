package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/usage"
)

func (a *app) tokenCommand() *cobra.Command {
	var db database
	var principal, subject, client, audience string
	var accounts []string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token --subject S",
		Short: "Print a bearer token for scripts, signed as the server on this database",
		Long: "Print a bearer token signed by the local issuer of the database actiond serve\n" +
			"uses, naming the public URL that server records there: the two cannot disagree.\n" +
			"MCP hosts do not need one: they sign in by themselves.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if subject == "" {
				return usagef("--subject is required: the user the token acts for")
			}
			var aud func(string) string
			switch audience {
			case "mcp":
				aud = auth.MCPAudience
			case "graphql":
				aud = auth.GraphQLAudience
			default:
				return usagef("--audience must be mcp or graphql, not %q", audience)
			}
			ctx := cmd.Context()
			st, err := db.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			public, ok, err := st.Setting(ctx, store.SettingPublicURL)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("the database (%s) was never served, so no public URL is recorded for its tokens; start `actiond serve %s` first", db.describe(), db.flags())
			}
			issuer, err := auth.NewLocalIssuer(ctx, auth.LocalIssuerOptions{URL: public, KeyStore: st})
			if err != nil {
				return err
			}
			token, err := issuer.Mint(auth.MintOptions{Principal: principal, Subject: subject, Client: client, Accounts: accounts, Audience: aud(public), TTL: ttl})
			if err != nil {
				return usage.Error{Err: err}
			}
			_, err = fmt.Fprintln(a.stdout, token)
			return err
		},
	}
	db.register(cmd)
	cmd.Flags().StringVar(&principal, "principal", server.LocalPrincipal, "the principal the token acts as")
	cmd.Flags().StringVar(&subject, "subject", "", "the user (sub claim); required")
	cmd.Flags().StringVar(&client, "client", "actiond-token", "the OAuth client (client_id claim)")
	cmd.Flags().StringSliceVar(&accounts, "account", []string{auth.DefaultAccount}, "accounts the token may reach")
	cmd.Flags().StringVar(&audience, "audience", "mcp", "mcp (the MCP endpoints) or graphql (the GraphQL API)")
	cmd.Flags().DurationVar(&ttl, "ttl", auth.DefaultTokenTTL, "how long the token is valid, at most 168h")
	_ = cmd.RegisterFlagCompletionFunc("audience", cobra.FixedCompletions([]string{"mcp", "graphql"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
