// The one way the page reads anything: the public GraphQL API, on this
// origin, as the viewer. Without a token a loopback actiond answers as the
// local root, as it does for any GraphQL client; anywhere else the API
// answers 401 and the page asks for a token, which it keeps for this tab
// only (sessionStorage) and sends as a bearer token.

export const ENDPOINT = '/financial/v1/graphql';
const TOKEN_KEY = 'actiond.explorer.token';

export class AuthRequired extends Error {
  constructor(message) { super(message); this.name = 'AuthRequired'; }
}

export class APIError extends Error {
  constructor(errors) {
    super(errors.map((e) => e.message).join('\n'));
    this.name = 'APIError';
    this.errors = errors;
    this.code = errors[0]?.extensions?.code || '';
  }
}

// anonymous says what a request without a token got: 'root' once the API
// answered one (a loopback actiond's local root), 'refused' after a 401.
let anonymous = 'unknown';
export function anonymousAccess() { return anonymous; }

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

export function setToken(value) {
  const t = value.trim().replace(/^Bearer\s+/i, '');
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
}

// claims reads a token's payload to say whom the page views as. It is not
// verified here: the API verifies every request.
export function claims() {
  const t = token();
  if (!t) return null;
  try {
    const part = t.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part + '='.repeat((4 - part.length % 4) % 4)));
  } catch {
    return {};
  }
}

// operations the current view ran, for copy-as-GraphQL.
let shown = [];
export function resetShown() { shown = []; }
export function shownOperations() { return shown.slice(); }

export async function gql(query, variables = {}, opts = {}) {
  const headers = {'Content-Type': 'application/json', Accept: 'application/json'};
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  const resp = await fetch(ENDPOINT, {
    method: 'POST', headers, body: JSON.stringify({query, variables}),
    credentials: 'omit', cache: 'no-store', redirect: 'error', signal: opts.signal,
  });
  if (resp.status === 401) {
    if (!t) anonymous = 'refused';
    throw new AuthRequired(t ? 'The API refused the token: it may have expired, or be for MCP rather than GraphQL.'
      : 'This actiond asks for a token: paste one whose audience is its GraphQL API.');
  }
  let body;
  try {
    body = await resp.json();
  } catch {
    throw new APIError([{message: `The API answered HTTP ${resp.status} without JSON.`}]);
  }
  if (!t) anonymous = 'root';
  if (body.errors && body.errors.length) throw new APIError(body.errors);
  if (opts.show !== false) {
    const key = query + JSON.stringify(variables);
    if (!shown.some((op) => op.key === key)) shown.push({key, query, variables});
  }
  return body.data;
}

// asGraphQL renders the operations as a document someone can paste into any
// GraphQL client, each with its variables.
export function asGraphQL(ops) {
  return ops.map((op) => {
    const vars = Object.keys(op.variables || {}).length ? '# variables: ' + JSON.stringify(op.variables) + '\n' : '';
    return vars + dedent(op.query);
  }).join('\n\n') + '\n';
}

function dedent(text) {
  const lines = text.replace(/^\n+|\s+$/g, '').split('\n');
  const indent = Math.min(...lines.slice(1).filter((l) => l.trim()).map((l) => l.match(/^\s*/)[0].length), Infinity);
  return lines.map((l, i) => (i === 0 || !isFinite(indent) ? l.trim() === l ? l : l.trimStart() : l.slice(indent))).join('\n');
}

// hasField says whether the API offers a field, so that the views of
// features a later actiond adds (replay) light up when it has them.
const typeCache = new Map();
export async function hasField(typeName, fieldName) {
  if (!typeCache.has(typeName)) {
    typeCache.set(typeName, gql(`query ExplorerType($name: String!) { __type(name: $name) { fields { name } } }`,
      {name: typeName}, {show: false}).then((d) => new Set((d.__type?.fields || []).map((f) => f.name))).catch(() => new Set()));
  }
  return (await typeCache.get(typeName)).has(fieldName);
}
