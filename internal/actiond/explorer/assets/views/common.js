// What several views show the same way: a request's tool, status and
// intent, the annotations of a tool.
import {h, badge} from '../dom.js';

// outcome is how the request ended for its client: its status, or
// TOOL_ERROR for a result with isError. The API says so in outcome, as
// actiond's CLI does; a view that did not ask for it reads the invocation.
export function outcome(e) {
  if (e.outcome) return e.outcome;
  if (e.status === 'SUCCEEDED' && e.invocation && e.invocation.output && e.invocation.output.isError) return 'TOOL_ERROR';
  return e.status;
}

export function statusBadge(e) {
  const o = outcome(e);
  return badge(o, o.toLowerCase());
}

// toolOf is the tool a tools/call named, or the resource a read named.
export function toolOf(e) {
  const r = e.mcpRequest;
  if (!r || !r.params) return '';
  return r.params.name || r.params.uri || '';
}

export function previewMark(e) {
  return e.preview ? badge('preview', 'preview') : null;
}

export function annotationBadges(a) {
  if (!a) return [];
  return [
    a.readOnlyHint ? badge('read-only', 'readonly') : badge('writes', 'writes'),
    a.destructiveHint === false ? badge('not destructive', 'nondestructive') : a.readOnlyHint ? null : badge('may destroy', 'destructive'),
    a.openWorldHint ? badge('open world', 'openworld') : badge('closed world', 'closedworld'),
  ];
}

// hostOf names the MCP host of a request: the clientInfo it sent (revision
// 2026-07-28 carries it in _meta) and the OAuth client of its token.
export function hostOf(e) {
  if (!e) return '';
  const meta = (e.mcpRequest && e.mcpRequest.params && e.mcpRequest.params._meta) || {};
  const info = meta['io.modelcontextprotocol/clientInfo'] || (e.mcpRequest && e.mcpRequest.params && e.mcpRequest.params.clientInfo);
  const name = info ? [info.name, info.version].filter(Boolean).join(' ') : '';
  return [name, e.client].filter(Boolean).join(' · ');
}

export const statuses = ['QUEUED', 'RUNNING', 'ACCEPTED', 'RETRY_SCHEDULED', 'SUCCEEDED', 'FAILED', 'EXHAUSTED', 'CANCELLED'];

// refusalReason reads a refusal's code and message, and how many refusals
// of the same principal and subject were only counted before it.
export function refusalOf(e) {
  const err = e.error || {};
  const inv = (e.invocation && e.invocation.error) || {};
  const details = inv.details || {};
  return {code: err.code || inv.code || '', message: err.message || inv.message || '',
    unrecorded: details.unrecorded_refusals, window: details.window};
}

export function refusalCells(e) {
  const r = refusalOf(e);
  return [h('code', {}, r.code), ' ', r.message,
    r.unrecorded !== undefined ? h('span', {class: 'unrecorded'}, ` · ${r.unrecorded} unrecorded_refusals since ${r.window}`) : null];
}

// The fields of a request in a list.
export const requestFields = `id status outcome preview caller subject client startedAt endedAt invocation sessionId role
  mcpRequest { method params intent }`;
