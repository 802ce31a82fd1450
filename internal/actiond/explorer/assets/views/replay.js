// Replay: pick recent requests of a server, replay them against a later
// version or a draft, and compare each original with its replay. The API's
// replayExecution arrives with the replay issue; until this actiond has it,
// the view says so and compares requests that were already recorded, such
// as the same call before and after a change.
import {h, append, field, note, section, table, time} from '../dom.js';
import {gql, hasField} from '../api.js';
import {link} from '../app.js';
import {previewMark, requestFields, statusBadge, toolOf} from './common.js';

const query = `query ExplorerReplay($id: ID!) {
  action(id: $id) { id name version history { version modified }
    executions(where: { role: "request", method: "tools/call" }, last: 50) { edges { node { ${requestFields} actionVersion } } } } }`;

export async function replayView(ctx, el, id) {
  const [data, canReplay] = await Promise.all([gql(query, {id}, {signal: ctx.signal}), hasField('ActionsMutation', 'replayExecution')]);
  const server = data.action;
  if (!server) throw new Error('No server ' + id + ' that you may read.');
  ctx.crumbs([server.name, link(['server', id])], ['Replay', null]);
  const requests = data.action.executions.edges.map((e) => e.node).reverse();
  const picked = new Set();
  const version = h('select', {id: 'replay-version', name: 'version'},
    server.history.map((v) => h('option', {value: v.version, selected: v.version === server.version}, `v${v.version}`)));
  const draft = h('textarea', {id: 'replay-draft', rows: 6, placeholder: '{ "tools": [...] } — an unpublished definition of this server', spellcheck: 'false'});
  const status = h('p', {id: 'replay-status', role: 'status'});
  const replay = h('button', {type: 'button', id: 'replay', disabled: !canReplay, onclick: () => run()}, 'Replay the picked requests');
  const compare = h('button', {type: 'button', id: 'compare-picked', onclick: () => {
    const [a, b] = [...picked];
    if (!a || !b) { status.textContent = 'Pick two requests to compare.'; return; }
    location.hash = link(['compare', a, b]);
  }}, 'Compare two picked requests');

  async function run() {
    // The replay issue defines replayExecution; its answer is a replay
    // execution, compared with the original here.
    status.textContent = 'Replay is not offered by this actiond yet.';
  }

  append(el, [
    h('h1', {}, 'Replay requests of ', server.name),
    canReplay ? null : note('This actiond\u2019s API has no replayExecution yet: replaying arrives with the replay issue. ' +
      'Pick two recorded requests to compare them side by side meanwhile.', 'warn'),
    h('form', {class: 'filters', onsubmit: (e) => e.preventDefault()},
      field('Against version', version), field('Or a draft (JSON)', draft),
      h('div', {class: 'actions'}, replay, compare)),
    status,
    section('Recent tool calls', requests.length ? table([
      ['Pick', (r) => h('input', {type: 'checkbox', class: 'pick', 'aria-label': 'Pick request ' + r.id, dataset: {execution: r.id},
        onchange: (e) => { if (e.target.checked) picked.add(r.id); else picked.delete(r.id); }})],
      ['When', (r) => h('a', {href: link(['execution', r.id])}, time(r.startedAt))],
      ['Tool', (r) => toolOf(r)],
      ['Version', (r) => 'v' + r.actionVersion],
      ['Intent', (r) => r.mcpRequest?.intent || ''],
      ['Status', (r) => [statusBadge(r), ' ', previewMark(r)]],
      ['Principal', (r) => [r.caller, ' / ', r.subject]],
    ], requests, {class: 'replay', rowAttrs: (r) => ({dataset: {execution: r.id}})}) : note('No tool call recorded yet.')),
  ]);
}
