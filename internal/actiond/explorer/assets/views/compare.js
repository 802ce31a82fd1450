// Two executions side by side — an original request and its replay, or any
// two requests — with the lines of output, calls and write set that differ
// highlighted on both sides.
import {h, append, field, json, note, section} from '../dom.js';
import {gql} from '../api.js';
import {link} from '../app.js';
import {executionQuery, flatten} from './execution.js';
import {outcome, statusBadge, toolOf} from './common.js';

export async function compareView(ctx, el, left, right) {
  const [a, b] = await Promise.all([left, right].map((id) => gql(executionQuery, {id}, {signal: ctx.signal}).then((d) => d.execution)));
  if (!a || !b) throw new Error('No execution ' + (!a ? left : right) + ' that you may read.');
  ctx.crumbs([a.actionName, link(['server', a.actionId])], ['Compare', null]);
  const aInput = h('input', {id: 'compare-left', value: left, size: 38});
  const bInput = h('input', {id: 'compare-right', value: right, size: 38});
  const pick = h('form', {class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    location.hash = link(['compare', aInput.value.trim(), bInput.value.trim()]);
  }}, field('Original', aInput), field('Compared with', bInput), h('div', {class: 'actions'}, h('button', {type: 'submit'}, 'Compare')));

  const outputs = diffSection('Output', shape(a.output), shape(b.output), 'output');
  const calls = diffSection('Calls', callLines(a), callLines(b), 'calls');
  const writes = diffSection('Write set', writeLines(a), writeLines(b), 'writes');
  append(el, [
    h('h1', {}, 'Compare'),
    pick,
    h('div', {class: 'sides'}, side(a, 'Original'), side(b, 'Compared with')),
    h('ul', {class: 'verdicts', id: 'verdicts'}, [outputs, calls, writes].map((d) => h('li', {dataset: {part: d.part, same: d.same}},
      d.title, ': ', d.same ? 'the same' : h('strong', {class: 'differs'}, 'differs')))),
    outputs.el, calls.el, writes.el,
  ]);
}

function side(e, label) {
  return h('div', {class: 'side'}, h('h2', {}, label),
    h('p', {}, h('a', {href: link(['execution', e.id])}, e.id)),
    h('p', {}, (e.mcpRequest ? e.mcpRequest.method + ' ' + toolOf(e) : e.actionName), ' v' + e.actionVersion, ' ', statusBadge(e)),
    e.mcpRequest?.intent ? h('p', {class: 'muted'}, '\u201c' + e.mcpRequest.intent + '\u201d') : null);
}

// shape is what the output compares by: a result's structured content or
// text, without the _meta that names the answering version.
function shape(output) {
  if (!output || typeof output !== 'object') return lines(output);
  const {_meta, ...rest} = output;
  return lines(rest);
}

function lines(value) {
  return value === undefined || value === null ? ['(none)'] : json(value).split('\n');
}

function callLines(e) {
  const calls = flatten(e);
  if (!calls.length) return ['(no call)'];
  return calls.map((c) => `${c.actionName} ${outcome(c)}${c.rolledBackByExecutionId ? ' rolled back' : ''}`);
}

function writeLines(e) {
  const out = [];
  let unreadable = 0;
  for (const c of flatten(e)) {
    for (const w of c.writeSet || []) out.push(`${w.table} ${w.key} = ${w.deleted ? '(deleted)' : JSON.stringify(w.value)}`);
    unreadable += c.writeSetUnreadable || 0;
  }
  if (unreadable) out.push(`(${unreadable} rows you may not read)`);
  return out.length ? out : ['(no write)'];
}

function diffSection(title, left, right, part) {
  const ops = diff(left, right);
  const same = ops.every((op) => op.kind === 'same');
  const col = (which) => h('pre', {class: 'diff', tabindex: 0, dataset: {side: which}}, ops.filter((op) => op.kind === 'same' || op.kind === which)
    .map((op) => h('span', {class: 'line ' + (op.kind === 'same' ? '' : 'changed')}, op.text + '\n')));
  return {title, part, same, el: section(title, h('div', {class: 'sides', dataset: {part, same}}, col('left'), col('right')),
    same ? note('No difference.') : null)};
}

// diff is a line diff by longest common subsequence: small enough for the
// outputs and write sets people compare.
export function diff(a, b) {
  if (a.length * b.length > 4e6) {
    return [...a.map((text) => ({kind: 'left', text})), ...b.map((text) => ({kind: 'right', text}))];
  }
  const dp = Array.from({length: a.length + 1}, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) { out.push({kind: 'same', text: a[i]}); i++; j++; }
    else if (dp[i + 1][j] >= dp[i][j + 1]) out.push({kind: 'left', text: a[i++]});
    else out.push({kind: 'right', text: b[j++]});
  }
  while (i < a.length) out.push({kind: 'left', text: a[i++]});
  while (j < b.length) out.push({kind: 'right', text: b[j++]});
  return out;
}
