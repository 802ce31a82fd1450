// One execution in full: a request as recorded and the result its client
// received, its call tree by lineage with each call's effective input,
// output or error and write set (rows the viewer may not read only
// counted), what rolled back, its uses; a refusal's reason; a task's
// transcript: the agent's model exchanges, skill loads and tool calls, which
// its record keeps as the executions beneath it.
import {h, append, badge, duration, note, pre, section, table, time} from '../dom.js';
import {gql} from '../api.js';
import {link} from '../app.js';
import {outcome, previewMark, refusalOf, statusBadge, toolOf} from './common.js';
import {waterfall} from './waterfall.js';

export const DEPTH = 4;

const callFields = `id actionId actionName actionVersion role eventType status outcome caller input output error invocation preview
  rolledBackByExecutionId parentId startedAt endedAt startedBy { executionId notStarted }
  writeSet { table key value deleted } writeSetUnreadable uses { kind executionId }`;

// nested asks for calls depth levels down, and for the IDs one level
// further, so that the page knows where a deeper tree goes on.
export function nested(depth) {
  return depth === 0 ? 'calls { id }' : `calls { ${callFields} ${nested(depth - 1)} }`;
}

const query = `query ExplorerExecution($id: ID!) {
  execution(id: $id) { ${callFields} actionName eventType sessionId subject client
    mcpRequest { method params id principal subject client protocolVersion intent }
    ${nested(DEPTH)} } }`;

const startedQuery = `query ExplorerStarted($id: ID!) {
  actions { executions(where: { startedBy: $id }, first: 100) { edges { node { id actionName actionVersion role status preview startedAt endedAt } } } } }`;

const subtreeQuery = `query ExplorerCalls($id: ID!) { execution(id: $id) { id ${nested(DEPTH)} } }`;

export async function executionView(ctx, el, id) {
  const [data, started] = await Promise.all([gql(query, {id}, {signal: ctx.signal}),
    gql(startedQuery, {id}, {signal: ctx.signal}).then((d) => d.actions.executions.edges.map((x) => x.node))]);
  const e = data.execution;
  if (!e) throw new Error('No execution ' + id + ' that you may read.');
  // A request's action is its server; a call's is a tool, reached through
  // the execution that called it.
  const crumbs = e.mcpRequest ? [[e.actionName, link(['server', e.actionId])]] : [];
  if (e.sessionId) crumbs.push([e.sessionId, link(['session', e.actionId, e.sessionId])]);
  if (e.parentId) crumbs.push(['called by ' + e.parentId.slice(0, 8), link(['execution', e.parentId])]);
  crumbs.push([e.role + ' ' + e.id.slice(0, 8), null]);
  ctx.crumbs(...crumbs);

  const r = e.mcpRequest;
  append(el, [
    h('h1', {}, title(e), ' ', statusBadge(e), ' ', previewMark(e)),
    h('dl', {class: 'facts'},
      h('dt', {}, 'Execution'), h('dd', {}, h('code', {id: 'execution-id'}, e.id)),
      h('dt', {}, 'Role'), h('dd', {}, e.role),
      h('dt', {}, 'Action'), h('dd', {}, e.actionName, version(e)),
      h('dt', {}, 'Principal'), h('dd', {}, e.caller, e.subject ? ' / ' + e.subject : '', e.client ? ' · ' + e.client : ''),
      h('dt', {}, 'Started'), h('dd', {}, time(e.startedAt)),
      h('dt', {}, 'Took'), h('dd', {}, duration(e.startedAt, e.endedAt)),
      r ? [h('dt', {}, 'Protocol'), h('dd', {}, r.protocolVersion)] : null,
      e.startedBy ? [h('dt', {}, 'Started by'), h('dd', {id: 'started-by'}, h('a', {href: link(['execution', e.startedBy.executionId])}, e.startedBy.executionId),
        e.startedBy.notStarted ? ' · not started: a replay recorded the task it would have started' : '')] : null,
      e.rolledBackByExecutionId ? [h('dt', {}, 'Rolled back by'), h('dd', {}, h('a', {href: link(['execution', e.rolledBackByExecutionId])}, e.rolledBackByExecutionId))] : null),
    r && r.intent ? h('blockquote', {class: 'intent-quote', id: 'intent'}, h('span', {class: 'label'}, 'Stated intent: '), r.intent) : null,
    e.role === 'refusal' ? refusal(e) : null,
    e.mcpRequest ? h('p', {}, h('a', {href: link(['replay', e.actionId]), id: 'compare-link'}, 'Compare with other requests of this server')) : null,
    e.calls && e.calls.length ? section('Waterfall', h('div', {class: 'scroll'}, waterfall(e))) : null,
    section(r ? 'The request as recorded' : 'Input', pre(e.input)),
    section(r ? 'The result the client received' : outcomeTitle(e), e.output !== null ? pre(e.output, 'json result') : note('No result: ' + e.status)),
    e.error ? section('Error', pre(e.error, 'json error')) : null,
    e.invocation ? section('What the run recorded about itself', pre(e.invocation)) : null,
    transcript(e),
    started.length ? section('Tasks it started', startedTasks(started)) : null,
    section('Call tree', callTree(ctx, e)),
    e.role !== 'request' ? section('Write set', writeSet(e)) : null,
    section('Uses', uses(e)),
  ]);
}

// version is an action's version; a native tool has none.
function version(e) {
  return e.actionVersion ? ` v${e.actionVersion}` : ' (native)';
}

function title(e) {
  const r = e.mcpRequest;
  if (!r) return e.actionName;
  const tool = toolOf(e);
  return r.method + (tool ? ' ' + tool : '');
}

function outcomeTitle(e) {
  return e.status === 'FAILED' ? 'Output (none: it failed)' : 'Output';
}

function refusal(e) {
  const r = refusalOf(e);
  return h('div', {class: 'refusal', id: 'refusal'},
    h('p', {}, h('strong', {}, 'Refused: '), h('code', {}, r.code), ' ', r.message),
    r.unrecorded !== undefined ? h('p', {}, h('span', {id: 'unrecorded'}, String(r.unrecorded)),
      ` more refusals of this principal and subject were only counted (unrecorded_refusals) in the window opened ${r.window}.`) : null);
}

// transcript shows a task's run in order from the executions beneath it:
// each model exchange's new messages and answer, each skill it loaded, each
// tool it called with what it answered.
function transcript(e) {
  if (e.role !== 'task') return null;
  const steps = (e.calls || []).filter((c) => c.actionName !== undefined);
  if (!steps.length) return section('Transcript', note(e.status === 'QUEUED' ? 'The task has not started yet.' : 'This task recorded no step yet.'));
  const turns = [];
  for (const c of steps) {
    if (c.eventType === 'model.exchange') {
      const input = c.input || {};
      if (input.system) turns.push(turn('system', 'Instructions', input.system, c));
      // An exchange records what was added since the one before: the
      // previous answer, shown already, and what the model is told now.
      for (const m of input.messages || []) if (m.role === 'user') turns.push(turn('user', 'Told the model', blocks(m.content), c));
      if (c.output) turns.push(turn('assistant', 'The model answered (turn ' + input.turn + ')', blocks(c.output.content), c));
      if (c.error) turns.push(turn('error', 'The exchange failed', c.error, c));
    } else if (c.eventType === 'skill.load') {
      turns.push(turn('skill', 'Loaded the skill', `${c.actionName} v${c.actionVersion}`, c));
    } else {
      turns.push(turn('tool', 'Called ' + c.actionName, c.error ? {input: c.input, error: c.error} : {input: c.input, output: c.output}, c));
    }
  }
  return section('Transcript', h('ol', {class: 'transcript', id: 'transcript'}, turns));
}

function turn(kind, label, content, c) {
  return h('li', {class: 'turn ' + kind, dataset: {kind, execution: c.id}},
    h('span', {class: 'label'}, label, ' '), h('a', {href: link(['execution', c.id]), class: 'turn-link'}, 'open'),
    typeof content === 'string' ? h('pre', {class: 'text', tabindex: 0}, content) : pre(content));
}

// blocks renders a message's content blocks as text: what was said, which
// tool was asked for with which input, and what a tool answered.
function blocks(content) {
  return (content || []).map((b) => {
    if (b.type === 'text') return b.text;
    if (b.type === 'tool_use') return `\u2192 ${b.name} ${JSON.stringify(b.input)}`;
    if (b.type === 'tool_result') return `\u2190 ${b.isError ? '(error) ' : ''}${b.content}`;
    return JSON.stringify(b);
  }).join('\n');
}

// startedTasks are the tasks a request (or an invoke beneath it) started,
// each linking to its own page and transcript.
function startedTasks(tasks) {
  return table([
    ['Task', (t) => h('a', {href: link(['execution', t.id]), class: 'started-task'}, t.id.slice(0, 8))],
    ['Agent', (t) => [t.actionName, ' v' + t.actionVersion]],
    ['Status', (t) => [statusBadge(t), ' ', previewMark(t)]],
    ['Started', (t) => time(t.startedAt)],
    ['Took', (t) => duration(t.startedAt, t.endedAt)],
  ], tasks, {class: 'started', rowAttrs: (t) => ({dataset: {execution: t.id, status: t.status}})});
}

function callTree(ctx, e) {
  if (!e.calls || !e.calls.length) return note(e.role === 'request' ? 'The request made no call.' : 'No call beneath this one.');
  return h('ol', {class: 'tree', id: 'call-tree', role: 'tree', 'aria-label': 'Calls by lineage'}, e.calls.map((c) => callNode(ctx, c, 1)));
}

function callNode(ctx, c, depth) {
  const body = h('div', {class: 'call-body'},
    h('h4', {}, 'Effective input'), pre(c.input, 'json input'),
    c.status === 'FAILED' || c.error ? [h('h4', {}, 'Error'), pre(c.error, 'json error')] : [h('h4', {}, 'Output'), pre(c.output, 'json output')],
    program(c),
    h('h4', {}, 'Write set'), writeSet(c),
    c.uses && c.uses.length ? [h('h4', {}, 'Uses'), uses(c)] : null);
  const children = h('ol', {class: 'tree', role: 'group'});
  if (c.calls && c.calls.length) {
    if (c.calls[0].actionName === undefined) {
      children.append(h('li', {}, h('button', {type: 'button', class: 'deeper', onclick: (ev) => deeper(ctx, ev, c.id, children, depth)},
        `Load ${c.calls.length} deeper call${c.calls.length > 1 ? 's' : ''}`)));
    } else {
      c.calls.forEach((child) => children.append(callNode(ctx, child, depth + 1)));
    }
  }
  return h('li', {role: 'treeitem', 'aria-level': depth, class: 'call', dataset: {execution: c.id, parent: c.parentId, name: c.actionName, status: c.status}},
    h('details', {open: depth <= 2},
      h('summary', {},
        h('span', {class: 'call-name'}, c.actionName), version(c), ' ', statusBadge(c), ' ', previewMark(c), ' ',
        h('span', {class: 'took'}, duration(c.startedAt, c.endedAt)),
        c.rolledBackByExecutionId ? [' ', badge('rolled back', 'rolledback'), ' by ', h('a', {href: link(['execution', c.rolledBackByExecutionId]), class: 'rolled-back-by'}, c.rolledBackByExecutionId.slice(0, 8))] : null,
        ' ', h('a', {href: link(['execution', c.id]), class: 'call-link', 'aria-label': 'Open call ' + c.actionName}, 'open')),
      body),
    children);
}

// program shows a program's source and an invoke's target as code, not
// buried in the JSON of its input, when a call of those native tools is
// recorded.
function program(c) {
  if (c.actionName === 'program' && c.input && typeof c.input.source === 'string') {
    return [h('h4', {}, 'Program'), h('pre', {class: 'source', tabindex: 0}, c.input.source)];
  }
  if (c.actionName === 'invoke' && c.input) {
    return [h('h4', {}, 'Invoked'), pre({action_id: c.input.action_id, commit: c.input.commit === true, draft: c.input.draft ? 'a draft (in the input)' : null})];
  }
  return null;
}

async function deeper(ctx, event, id, children, depth) {
  event.currentTarget.disabled = true;
  const data = await gql(subtreeQuery, {id}, {signal: ctx.signal});
  children.replaceChildren(...data.execution.calls.map((c) => callNode(ctx, c, depth + 1)));
}

function writeSet(c) {
  const rows = c.writeSet || [];
  const unreadable = c.writeSetUnreadable || 0;
  const summary = h('p', {class: 'ws-summary'}, rows.length + ' row' + (rows.length === 1 ? '' : 's'),
    c.preview ? ' it would have written (preview: none committed)' : c.rolledBackByExecutionId ? ' it wrote, rolled back' : ' written',
    unreadable ? h('span', {class: 'unreadable', dataset: {count: unreadable}}, ` · ${unreadable} row${unreadable === 1 ? '' : 's'} you may not read`) : null);
  if (!rows.length) return summary;
  return [summary, table([
    ['Table', (w) => w.table],
    ['Key', (w) => h('code', {}, w.key)],
    ['New value', (w) => w.deleted ? badge('deleted', 'failed') : pre(w.value)],
  ], rows, {class: 'writeset'})];
}

function uses(e) {
  if (!e.uses || !e.uses.length) return note('No use recorded.');
  return h('ul', {class: 'uses'}, e.uses.map((u) => h('li', {}, u.kind, ' of ', h('a', {href: link(['execution', u.executionId])}, u.executionId))));
}

// flatten lists a tree's calls depth first, for comparing write sets.
export function flatten(e) {
  const out = [];
  const walk = (c) => { out.push(c); (c.calls || []).forEach((x) => x.actionName !== undefined && walk(x)); };
  (e.calls || []).forEach(walk);
  return out;
}

export {query as executionQuery, outcome};
