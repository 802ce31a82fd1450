// Replay: pick recent requests of a server, replay them against a later
// version or a draft with replayExecution, and compare each original with
// its replay side by side (the compare view). An actiond whose API lacks
// replayExecution gets a note, and two recorded requests can still be
// compared.
import {h, append, badge, field, note, section, table, time} from '../dom.js';
import {gql, hasField} from '../api.js';
import {link} from '../app.js';
import {previewMark, requestFields, statusBadge, toolOf} from './common.js';

const replayMutation = `mutation ExplorerReplayRun($id: ID!, $version: Int, $draft: ActionUpdateInput) {
  actions { replayExecution(executionId: $id, version: $version, draft: $draft) {
    original { id } replay { id status } serverVersion outputChanged writeSetChanged } } }`;

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

  const results = h('div', {id: 'replay-results'});

  // run replays each picked request, one after another: each replay is a
  // mutation of its own, recorded beside its original.
  async function run() {
    const ids = requests.filter((r) => picked.has(r.id)).map((r) => r.id);
    if (!ids.length) { status.textContent = 'Pick the requests to replay.'; return; }
    const against = {};
    const text = draft.value.trim();
    if (text) {
      try { against.draft = JSON.parse(text); } catch (e) { status.textContent = 'The draft is not JSON: ' + e.message; return; }
    } else {
      against.version = Number(version.value);
    }
    replay.disabled = true;
    status.textContent = `Replaying ${ids.length} request${ids.length === 1 ? '' : 's'}\u2026`;
    const rows = [];
    for (const id of ids) {
      try {
        const data = await gql(replayMutation, {id, ...against});
        rows.push({id, ...data.actions.replayExecution});
      } catch (e) {
        rows.push({id, error: e.message});
      }
    }
    replay.disabled = false;
    const changed = rows.filter((r) => r.outputChanged || r.writeSetChanged).length;
    const failed = rows.filter((r) => r.error).length;
    status.textContent = `Replayed ${rows.length - failed} of ${rows.length} against ${text ? 'the draft' : 'v' + against.version}: ` +
      `${changed} differ${failed ? `, ${failed} could not be replayed` : ''}.`;
    results.replaceChildren(section('Replays', table([
      ['Original', (r) => h('a', {href: link(['execution', r.id])}, r.id.slice(0, 8))],
      ['Replay', (r) => r.error ? h('span', {class: 'error'}, r.error) : h('a', {href: link(['execution', r.replay.id])}, r.replay.id.slice(0, 8))],
      ['Output', (r) => r.error ? '' : verdict(r.outputChanged)],
      ['Write set', (r) => r.error ? '' : verdict(r.writeSetChanged)],
      ['', (r) => r.error ? '' : h('a', {class: 'compare', href: link(['compare', r.id, r.replay.id])}, 'Compare side by side')],
    ], rows, {class: 'replays', rowAttrs: (r) => ({dataset: {execution: r.id, output: r.error ? 'error' : String(!r.outputChanged), writes: r.error ? 'error' : String(!r.writeSetChanged)}})})));
  }

  append(el, [
    h('h1', {}, 'Replay requests of ', server.name),
    canReplay ? null : note('This actiond\u2019s API has no replayExecution. ' +
      'Pick two recorded requests to compare them side by side instead.', 'warn'),
    h('form', {class: 'filters', onsubmit: (e) => e.preventDefault()},
      field('Against version', version), field('Or a draft (JSON)', draft),
      h('div', {class: 'actions'}, replay, compare)),
    status,
    results,
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

function verdict(changed) {
  return changed ? h('strong', {class: 'differs'}, 'differs') : badge('the same', 'succeeded');
}
