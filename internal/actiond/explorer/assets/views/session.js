// A session's requests as a timeline, newest first: opened at the latest
// page, paged back on request, and kept current while the session is open
// by polling GraphQL for what came after the newest row (and for rows that
// were still running). Filters are part of the link.
import {h, append, badge, clear, duration, field, note, section, time} from '../dom.js';
import {gql} from '../api.js';
import {link} from '../app.js';
import {closeSession, refusalsTable} from './server.js';
import {hostOf, previewMark, requestFields, statusBadge, statuses, toolOf} from './common.js';

export const PAGE = 100;
export const POLL_MS = 2000;

const sessionQuery = `query ExplorerSession($actionId: ID!, $sessionId: String!, $where: ExecutionWhere, $last: Int, $before: String) {
  action(id: $actionId) { id name mcp { mode } offeredTools { tools { name } } }
  actions { session(actionId: $actionId, sessionId: $sessionId) { id input createdAt closed closedAt requestCount
    executions(where: $where, last: $last, before: $before) {
      edges { node { ${requestFields} calls { id } } }
      pageInfo { hasPreviousPage startCursor endCursor } } } } }`;

const newerQuery = `query ExplorerSessionNewer($actionId: ID!, $sessionId: String!, $where: ExecutionWhere, $after: String) {
  actions { session(actionId: $actionId, sessionId: $sessionId) { closed closedAt requestCount
    executions(where: $where, first: ${PAGE}, after: $after) {
      edges { node { ${requestFields} calls { id } } } pageInfo { endCursor } } } } }`;

const refusalsQuery = `query ExplorerSessionRefusals($actionId: ID!, $caller: String) {
  action(id: $actionId) { executions(where: { role: "refusal", caller: $caller }, last: 50) {
    edges { node { id status caller subject client startedAt error invocation mcpRequest { method params } } } } } }`;

// where turns the link's filters into an ExecutionWhere.
export function whereOf(params) {
  const where = {};
  if (params.get('tool')) where.tool = params.get('tool');
  if (params.get('method')) where.method = params.get('method');
  if (params.get('status')) where.status = params.get('status');
  if (params.get('principal')) where.caller = params.get('principal');
  if (params.get('preview')) where.preview = params.get('preview') === 'yes';
  if (params.get('from')) where.startedAfter = new Date(params.get('from')).toISOString();
  if (params.get('to')) where.startedBefore = new Date(params.get('to')).toISOString();
  return where;
}

export async function sessionView(ctx, el, actionId, sessionId) {
  const where = whereOf(ctx.params);
  const data = await gql(sessionQuery, {actionId, sessionId, where, last: PAGE}, {signal: ctx.signal});
  const server = data.action;
  const session = data.actions.session;
  if (!server || !session) throw new Error(`No session ${sessionId} of server ${actionId} that you may read.`);
  ctx.crumbs([server.name, link(['server', actionId])], [session.id, null]);
  const conn = session.executions;
  const rows = conn.edges.map((e) => e.node);
  const state = {newest: conn.pageInfo.endCursor, oldest: conn.pageInfo.startCursor, closed: session.closed};

  const list = h('ol', {class: 'timeline', id: 'timeline', 'aria-label': 'Requests, newest first'});
  rows.slice().reverse().forEach((r) => list.append(entry(r)));
  const more = h('button', {type: 'button', id: 'load-earlier', hidden: !conn.pageInfo.hasPreviousPage,
    onclick: () => loadEarlier(ctx, {actionId, sessionId, where}, state, list, more)}, 'Load earlier requests');
  const count = h('span', {id: 'request-count'}, String(session.requestCount));
  const liveMark = h('span', {id: 'live', class: 'live', hidden: session.closed}, 'live');
  const first = rows[0];
  const principal = (first && first.caller) || session.input?.principal || '';

  append(el, [
    h('h1', {}, 'Session ', h('code', {}, session.id), ' ', session.closed ? badge('closed', 'closed') : badge('open', 'open'), ' ', liveMark),
    h('dl', {class: 'facts'},
      h('dt', {}, 'Server'), h('dd', {}, h('a', {href: link(['server', actionId])}, server.name), ' ', badge(server.mcp.mode, server.mcp.mode === 'LIVE' ? 'live' : 'previewmode')),
      h('dt', {}, 'Input'), h('dd', {}, Object.entries(session.input || {}).map(([k, v]) => h('span', {class: 'kv'}, k, '=', String(v)))),
      h('dt', {}, 'Host'), h('dd', {}, hostOf(first)),
      h('dt', {}, 'Requests'), h('dd', {}, count),
      h('dt', {}, 'Started'), h('dd', {}, time(session.createdAt)),
      session.closed ? [h('dt', {}, 'Closed'), h('dd', {}, time(session.closedAt))] : null),
    session.closed ? null : h('p', {}, h('button', {type: 'button', class: 'close-session', id: 'close-session',
      onclick: (e) => closeSession(e, server, session)}, 'Close this session')),
    filters(ctx.params, actionId, sessionId, server.offeredTools?.tools || []),
    section('Requests', rows.length ? null : note(Object.keys(where).length ? 'No request matches the filters.' : 'No request yet.', 'empty'), list, more),
  ]);
  const refusals = h('div', {id: 'refusals'});
  el.append(section('Refusals of this principal', note('Refusals are recorded outside any session, for the principal and subject refused.'), refusals));
  if (principal) {
    gql(refusalsQuery, {actionId, caller: principal}, {signal: ctx.signal}).then((d) => {
      const subject = first && first.subject;
      const mine = d.action.executions.edges.map((e) => e.node).filter((r) => !subject || r.subject === subject);
      append(refusals, refusalsTable(mine.reverse()));
    }).catch(() => append(refusals, note('The refusals could not be read.')));
  }
  if (!session.closed) poll(ctx, {actionId, sessionId, where}, state, list, count, liveMark);
}

function entry(r) {
  const tool = toolOf(r);
  const calls = r.calls ? r.calls.length : 0;
  return h('li', {class: 'entry ' + (r.preview ? 'is-preview' : ''), dataset: {execution: r.id, status: r.status, tool}},
    h('a', {href: link(['execution', r.id]), class: 'entry-link'},
      h('span', {class: 'when'}, time(r.startedAt)),
      h('span', {class: 'method'}, r.mcpRequest?.method || ''),
      h('span', {class: 'tool'}, tool),
      h('span', {class: 'status'}, statusBadge(r), ' ', previewMark(r)),
      h('span', {class: 'took'}, duration(r.startedAt, r.endedAt)),
      h('span', {class: 'calls'}, calls ? `${calls} call${calls > 1 ? 's' : ''}` : ''),
      h('span', {class: 'said'}, r.mcpRequest?.intent ? '\u201c' + r.mcpRequest.intent + '\u201d' : '')));
}

async function loadEarlier(ctx, vars, state, list, button) {
  button.disabled = true;
  try {
    const data = await gql(sessionQuery, {...vars, last: PAGE, before: state.oldest}, {signal: ctx.signal});
    const conn = data.actions.session.executions;
    conn.edges.map((e) => e.node).reverse().forEach((r) => list.append(entry(r)));
    state.oldest = conn.pageInfo.startCursor || state.oldest;
    button.hidden = !conn.pageInfo.hasPreviousPage;
  } finally {
    button.disabled = false;
  }
}

// poll keeps an open session current. It polls rather than holding a stream
// open so that every update goes through GraphQL with the viewer's own
// authority; a hidden tab does not poll, and it stops when the viewer goes
// elsewhere or the session closes.
function poll(ctx, vars, state, list, count, liveMark) {
  let timer = null;
  const tick = async () => {
    if (ctx.signal.aborted) return;
    if (document.visibilityState === 'visible') {
      try {
        await refresh(ctx, vars, state, list, count);
      } catch {
        // A failed poll is tried again on the next tick.
      }
    }
    if (state.closed) {
      liveMark.hidden = true;
      return;
    }
    if (!ctx.signal.aborted) timer = setTimeout(tick, POLL_MS);
  };
  timer = setTimeout(tick, POLL_MS);
  ctx.signal.addEventListener('abort', () => clearTimeout(timer));
}

async function refresh(ctx, vars, state, list, count) {
  const running = [...list.querySelectorAll('li[data-status="RUNNING"]')].map((li) => li.dataset.execution);
  const runningQuery = running.length ? `query ExplorerRunning { ${running.map((id, i) =>
    `r${i}: execution(id: ${JSON.stringify(id)}) { ${requestFields} calls { id } }`).join(' ')} }` : null;
  const [data, updated] = await Promise.all([
    gql(newerQuery, {...vars, after: state.newest}, {signal: ctx.signal, show: false}),
    runningQuery ? gql(runningQuery, {}, {signal: ctx.signal, show: false}) : null,
  ]);
  const session = data.actions.session;
  for (const r of Object.values(updated || {})) {
    const old = list.querySelector(`li[data-execution="${CSS.escape(r?.id || '')}"]`);
    if (r && old) old.replaceWith(entry(r));
  }
  const conn = session.executions;
  if (conn.edges.length) {
    const empty = list.parentElement.querySelector('.empty');
    if (empty) empty.remove();
    conn.edges.forEach((e) => list.prepend(entry(e.node)));
    state.newest = conn.pageInfo.endCursor;
  }
  count.textContent = String(session.requestCount);
  state.closed = session.closed;
}

function filters(params, actionId, sessionId, tools) {
  const value = (name) => params.get(name) || '';
  const toolInput = h('input', {name: 'tool', id: 'filter-tool', list: 'tool-names', value: value('tool'), autocomplete: 'off'});
  const status = h('select', {name: 'status', id: 'filter-status'}, h('option', {value: ''}, 'any'),
    statuses.map((s) => h('option', {value: s, selected: value('status') === s}, s)));
  const preview = h('select', {name: 'preview', id: 'filter-preview'}, h('option', {value: ''}, 'either'),
    h('option', {value: 'yes', selected: value('preview') === 'yes'}, 'preview only'),
    h('option', {value: 'no', selected: value('preview') === 'no'}, 'live only'));
  const principal = h('input', {name: 'principal', id: 'filter-principal', value: value('principal'), autocomplete: 'off'});
  const from = h('input', {type: 'datetime-local', name: 'from', id: 'filter-from', value: value('from'), step: 1});
  const to = h('input', {type: 'datetime-local', name: 'to', id: 'filter-to', value: value('to'), step: 1});
  const form = h('form', {class: 'filters', role: 'search', 'aria-label': 'Filter the requests', onsubmit: (e) => {
    e.preventDefault();
    const next = {};
    for (const [k, v] of new FormData(form).entries()) if (v) next[k] = v;
    location.hash = link(['session', actionId, sessionId], next);
  }},
  h('datalist', {id: 'tool-names'}, tools.map((t) => h('option', {value: t.name}))),
  field('Tool', toolInput), field('Status', status), field('Preview', preview), field('Principal', principal),
  field('From', from), field('To', to),
  h('div', {class: 'actions'}, h('button', {type: 'submit', id: 'apply-filters'}, 'Filter'),
    h('a', {href: link(['session', actionId, sessionId]), id: 'clear-filters'}, 'Clear')));
  return form;
}
