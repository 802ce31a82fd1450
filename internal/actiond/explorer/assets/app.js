// The explorer's shell: a router over the URL fragment, so that every view
// has a link (#/session/<server>/<session>?status=FAILED), the header with
// whom the page views as, and the parts every view shares: errors, the
// token prompt and copy-as-GraphQL.
import {h, append, clear, note} from './dom.js';
import {AuthRequired, APIError, anonymousAccess, asGraphQL, claims, resetShown, setToken, shownOperations, token} from './api.js';
import {serversView} from './views/servers.js';
import {serverView} from './views/server.js';
import {sessionView} from './views/session.js';
import {executionView} from './views/execution.js';
import {compareView} from './views/compare.js';
import {replayView} from './views/replay.js';

const routes = [
  [/^\/?$|^\/servers$/, serversView],
  [/^\/server\/([^/]+)$/, serverView],
  [/^\/session\/([^/]+)\/(.+)$/, sessionView],
  [/^\/execution\/([^/]+)$/, executionView],
  [/^\/compare\/([^/]+)\/([^/]+)$/, compareView],
  [/^\/replay\/([^/]+)$/, replayView],
];

// route reads the fragment: a path of URI-encoded parts and a query.
export function route() {
  const raw = location.hash.replace(/^#/, '');
  const [path, query] = raw.split('?');
  return {path: path || '/', params: new URLSearchParams(query || '')};
}

// link makes a fragment from parts, each encoded, and query parameters.
export function link(parts, params) {
  const path = '#/' + parts.map((p) => encodeURIComponent(p)).join('/');
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '' && v !== undefined && v !== null)).toString() : '';
  return q ? path + '?' + q : path;
}

let current = null;

// A view gets a context: the element to render into, the route's parts,
// and a signal that ends when the viewer goes elsewhere, for its polling.
async function render() {
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  resetShown();
  const {path, params} = route();
  const main = document.getElementById('main');
  const crumbs = document.getElementById('crumbs');
  clear(crumbs);
  main.dataset.state = 'loading';
  let view = null, args = [];
  for (const [pattern, fn] of routes) {
    const m = path.match(pattern);
    if (m) { view = fn; args = m.slice(1).map(decodeURIComponent); break; }
  }
  const ctx = {
    signal: controller.signal, params, crumbs: (...items) => setCrumbs(crumbs, items),
    ready: (name) => ready(main, name, controller),
    fail: (err) => showError(main, err, controller),
  };
  const body = h('div', {class: 'view'});
  try {
    if (!view) throw new Error('There is no view at ' + location.hash + '.');
    main.dataset.view = view.name.replace(/View$/, '');
    await view(ctx, body, ...args);
    if (controller.signal.aborted) return;
    clear(main);
    append(main, [toolbar(), body]);
    ctx.ready(main.dataset.view);
  } catch (err) {
    if (controller.signal.aborted) return;
    showError(main, err, controller);
  }
  renderWho();
}

function ready(main, name, controller) {
  if (controller.signal.aborted) return;
  main.dataset.state = 'ready';
  // Read by the browser tests and the first-render benchmark.
  document.documentElement.dataset.readyAt = String(Math.round(performance.now()));
  document.title = 'actiond explorer · ' + name;
}

function setCrumbs(el, items) {
  clear(el);
  const all = [['Servers', '#/servers'], ...items];
  all.forEach(([label, href], i) => {
    if (i) el.append(' / ');
    el.append(i === all.length - 1 || !href ? h('span', {'aria-current': 'page'}, label) : h('a', {href}, label));
  });
}

function toolbar() {
  return h('div', {class: 'toolbar'},
    h('button', {type: 'button', id: 'copy-graphql', onclick: copyGraphQL, title: 'The GraphQL operations this view ran, to paste into any client'}, 'Copy as GraphQL'));
}

async function copyGraphQL() {
  const text = asGraphQL(shownOperations());
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch {
    // Outside a secure context there is no clipboard: the dialog shows it.
  }
  const area = h('textarea', {id: 'graphql-text', readonly: true, rows: 16, 'aria-label': 'GraphQL operations'});
  area.value = text;
  openDialog('Copy as GraphQL', [
    note(copied ? 'Copied to the clipboard. The operations, as this view ran them:' : 'Select and copy the operations this view ran:'),
    area,
  ]);
  area.focus();
  area.select();
}

export function openDialog(title, children) {
  const dialog = document.getElementById('dialog');
  clear(dialog);
  append(dialog, [
    h('h2', {id: 'dialog-title'}, title),
    children,
    h('form', {method: 'dialog'}, h('button', {type: 'submit', id: 'dialog-close'}, 'Close')),
  ]);
  if (!dialog.open) dialog.showModal();
  return dialog;
}

function showError(main, err, controller) {
  clear(main);
  main.dataset.state = 'error';
  if (err instanceof AuthRequired) {
    append(main, tokenForm(err.message));
  } else {
    const code = err instanceof APIError && err.code ? ` (${err.code})` : '';
    append(main, h('div', {class: 'error', role: 'alert'}, h('h2', {}, 'The view could not be read' + code), h('pre', {}, err.message || String(err)),
      h('p', {}, h('a', {href: '#/servers'}, 'Back to the servers'))));
  }
  if (!controller.signal.aborted) document.documentElement.dataset.readyAt = String(Math.round(performance.now()));
  renderWho();
}

function tokenForm(message) {
  const input = h('textarea', {id: 'token', name: 'token', rows: 4, required: true, autocomplete: 'off', spellcheck: 'false',
    'aria-describedby': 'token-help'});
  const form = h('form', {class: 'token', onsubmit: (e) => { e.preventDefault(); setToken(input.value); render(); }},
    h('h2', {}, 'Sign in with a token'),
    h('p', {id: 'token-help'}, message, ' Make one with ', h('code', {}, 'actiond token --subject YOU --audience graphql'),
      '. The page keeps it for this tab only and shows only what the token\u2019s principal may read.'),
    h('label', {for: 'token'}, 'GraphQL token'), input,
    h('button', {type: 'submit', id: 'use-token'}, 'View as this token'));
  return form;
}

function renderWho() {
  const who = clear(document.getElementById('who'));
  if (!token()) {
    if (anonymousAccess() !== 'root') {
      append(who, h('span', {class: 'as'}, 'Not signed in'));
      return;
    }
    append(who, [h('span', {class: 'as'}, 'Viewing as the local root'),
      h('button', {type: 'button', id: 'sign-in', onclick: () => showError(document.getElementById('main'), new AuthRequired('View as a principal instead of the local root:'), current)}, 'Use a token')]);
    return;
  }
  const c = claims() || {};
  const principal = c.principal || c.sub || 'a token';
  append(who, [h('span', {class: 'as', title: 'subject ' + (c.sub || '?')}, 'Viewing as ', h('strong', {id: 'viewer'}, principal)),
    h('button', {type: 'button', id: 'sign-out', onclick: () => { setToken(''); render(); }}, 'Sign out')]);
}

export function rerender() { render(); }

window.addEventListener('hashchange', render);
render();
