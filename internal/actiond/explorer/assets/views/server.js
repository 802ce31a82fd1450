// One server: its definition at a glance, its last hour drawn, the tools it
// offers, its sessions (closed or open, closable from here), its recent
// refusals and requests.
import {h, append, badge, section, table, note, time, duration} from '../dom.js';
import {gql} from '../api.js';
import {link, rerender} from '../app.js';
import {annotationBadges, hostOf, previewMark, refusalCells, requestFields, statusBadge, toolOf} from './common.js';
import {lastHour} from './chart.js';

const query = `query ExplorerServer($id: ID!) {
  action(id: $id) { id name version enabled description
    mcp { name mode intent endpoint instructions limits { callsPerMinute } }
    offeredTools { unreadable tools { name actionId version native description unavailable
      annotations { readOnlyHint destructiveHint openWorldHint } } }
    refusals: executions(where: { role: "refusal" }, last: 20) { edges { node { id status caller subject client startedAt error invocation mcpRequest { method params } } } }
    recent: executions(where: { role: "request" }, last: 20) { edges { node { ${requestFields} } } }
  }
  actions { sessions(actionId: $id) { id input createdAt closed closedAt requestCount
    executions(first: 1) { edges { node { caller subject client mcpRequest { params } } } } } } }`;

const closeMutation = `mutation ExplorerCloseSession($actionId: ID!, $sessionId: String!) {
  actions { closeSession(actionId: $actionId, sessionId: $sessionId) { id closed closedAt } } }`;

export async function serverView(ctx, el, id) {
  const [data, hour] = await Promise.all([gql(query, {id}, {signal: ctx.signal}), lastHour(ctx, id)]);
  const s = data.action;
  if (!s) throw new Error('No server ' + id + ' that you may read.');
  ctx.crumbs([s.name, null]);
  append(el, [
    h('h1', {}, s.name, ' ', badge(s.mcp.mode, s.mcp.mode === 'LIVE' ? 'live' : 'previewmode'), ' ', h('span', {class: 'muted'}, 'v' + s.version)),
    s.description ? h('p', {}, s.description) : null,
    h('dl', {class: 'facts'},
      h('dt', {}, 'Endpoint'), h('dd', {}, h('code', {}, s.mcp.endpoint)),
      h('dt', {}, 'Stated intent'), h('dd', {}, s.mcp.intent),
      h('dt', {}, 'Calls per minute'), h('dd', {}, s.mcp.limits?.callsPerMinute ?? 'no limit'),
      h('dt', {}, 'Enabled'), h('dd', {}, s.enabled ? 'yes' : 'no')),
    h('p', {}, h('a', {href: link(['replay', s.id]), id: 'replay-link'}, 'Replay recent requests against a draft or a later version')),
    section('The last hour', hour),
    section('Tools offered', offeredTable(s.offeredTools)),
    section('Sessions', sessionsTable(s, data.actions.sessions)),
    section('Recent requests', requestsTable(s.recent.edges.map((e) => e.node))),
    section('Refusals', refusalsTable(s.refusals.edges.map((e) => e.node))),
  ]);
}

function offeredTable(offered) {
  if (!offered.tools.length && !offered.unreadable) return note('The server offers no tool now.');
  return [table([
    ['Tool', (t) => h('span', {class: 'tool-name'}, t.name)],
    ['Version', (t) => t.native ? 'native' : 'v' + t.version],
    ['Annotations', (t) => annotationBadges(t.annotations)],
    ['Description', (t) => [t.description || '', t.unavailable ? h('div', {class: 'warn'}, 'Not listed: ' + t.unavailable) : null]],
  ], offered.tools, {class: 'offered', rowAttrs: (t) => ({dataset: {tool: t.name}})}),
  offered.unreadable ? note(`${offered.unreadable} more tools you may not read.`, 'unreadable') : null];
}

function sessionsTable(server, sessions) {
  if (!sessions.length) return note('No session yet: a session starts with its first request.');
  return table([
    ['Session', (x) => h('a', {href: link(['session', server.id, x.id]), class: 'session-link'}, x.id)],
    ['Principal', (x) => first(x)?.caller || x.input?.principal || ''],
    ['Subject', (x) => first(x)?.subject || x.input?.subject || ''],
    ['Host', (x) => hostOf(first(x))],
    ['Requests', (x) => String(x.requestCount)],
    ['Started', (x) => time(x.createdAt)],
    ['State', (x) => x.closed ? [badge('closed', 'closed'), ' ', time(x.closedAt)] : [badge('open', 'open'), ' ',
      h('button', {type: 'button', class: 'close-session', dataset: {session: x.id}, onclick: (e) => closeSession(e, server, x)}, 'Close')]],
  ], sessions, {class: 'sessions', rowAttrs: (x) => ({dataset: {session: x.id, closed: x.closed}})});
}

function first(session) {
  return session.executions.edges[0]?.node;
}

// closeSession asks first: its new requests are refused from now on, and
// that cannot be undone.
export async function closeSession(event, server, session) {
  const button = event.currentTarget;
  if (!button.dataset.confirm) {
    button.dataset.confirm = 'yes';
    button.textContent = 'Close: its new requests will be refused';
    return;
  }
  button.disabled = true;
  try {
    await gql(closeMutation, {actionId: server.id, sessionId: session.id}, {show: false});
    rerender();
  } catch (err) {
    button.disabled = false;
    button.replaceWith(h('span', {class: 'error', role: 'alert'}, 'Closing failed: ' + err.message));
  }
}

export function requestsTable(requests, opts = {}) {
  if (!requests.length) return note(opts.empty || 'No request yet.');
  return table([
    ['When', (r) => h('a', {href: link(['execution', r.id]), class: 'request-link'}, time(r.startedAt))],
    ['Method', (r) => r.mcpRequest?.method || ''],
    ['Tool', (r) => toolOf(r)],
    ['Intent', (r) => r.mcpRequest?.intent || ''],
    ['Status', (r) => [statusBadge(r), ' ', previewMark(r)]],
    ['Took', (r) => duration(r.startedAt, r.endedAt)],
    ['Principal', (r) => [r.caller, r.subject ? ' / ' + r.subject : '']],
  ], requests, {class: 'requests', rowAttrs: (r) => ({dataset: {execution: r.id}})});
}

export function refusalsTable(refusals) {
  if (!refusals.length) return note('No refusal recorded.');
  return table([
    ['When', (r) => h('a', {href: link(['execution', r.id])}, time(r.startedAt))],
    ['Method', (r) => r.mcpRequest?.method || ''],
    ['Principal', (r) => [r.caller, ' / ', r.subject]],
    ['Reason', (r) => refusalCells(r)],
  ], refusals, {class: 'refusals', rowAttrs: (r) => ({dataset: {execution: r.id}})});
}
