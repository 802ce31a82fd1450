// Servers: every MCP server the viewer may read, with its mode, version and
// the tools it offers with their derived annotations.
import {h, append, badge, section, table, note} from '../dom.js';
import {gql} from '../api.js';
import {link} from '../app.js';
import {annotationBadges} from './common.js';

const query = `query ExplorerServers($after: String) {
  actions { list(first: 500, after: $after) {
    edges { node { id name kind version enabled description
      mcp { mode intent endpoint }
      offeredTools { unreadable tools { name version native annotations { readOnlyHint destructiveHint openWorldHint } unavailable } } } }
    pageInfo { hasNextPage endCursor } } } }`;

export async function serversView(ctx, el) {
  ctx.crumbs();
  const servers = [];
  let after = null;
  do {
    const data = await gql(query, after ? {after} : {}, {signal: ctx.signal});
    const list = data.actions.list;
    for (const edge of list.edges) if (edge.node.kind === 'mcp') servers.push(edge.node);
    after = list.pageInfo.hasNextPage ? list.pageInfo.endCursor : null;
  } while (after);
  const body = servers.length ? table([
    ['Server', (s) => h('a', {href: link(['server', s.id]), class: 'server-link'}, s.name)],
    ['Mode', (s) => [badge(s.mcp.mode, s.mcp.mode === 'LIVE' ? 'live' : 'previewmode'), s.enabled ? null : badge('disabled', 'failed')]],
    ['Version', (s) => 'v' + s.version],
    ['Tools offered', (s) => toolList(s.offeredTools)],
  ], servers, {class: 'servers', rowAttrs: (s) => ({dataset: {server: s.name}})})
    : note('No MCP server you may read.');
  append(el, section('MCP servers', body));
}

export function toolList(offered) {
  if (!offered) return '';
  return h('ul', {class: 'tools'},
    offered.tools.map((t) => h('li', {dataset: {tool: t.name}},
      h('span', {class: 'tool-name'}, t.name), t.native ? ' (native)' : ` v${t.version}`, ' ',
      annotationBadges(t.annotations), t.unavailable ? badge('unavailable: ' + t.unavailable, 'failed') : null)),
    offered.unreadable ? h('li', {class: 'unreadable'}, `${offered.unreadable} more you may not read`) : null);
}
