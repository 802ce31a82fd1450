// A server's last hour at a glance: its requests per minute as bars (the
// failed ones in their own colour) and, beneath, how long they took, the
// median and the 95th percentile of each minute, drawn from the requests
// GraphQL lists.
import {h, svg, note} from '../dom.js';
import {gql} from '../api.js';

export const minutes = 60;
// pages bounds what the chart reads: past it, the chart says it shows only
// the latest requests.
const pageSize = 500;
const pages = 4;

const query = `query ExplorerLastHour($id: ID!, $since: Timestamp!, $before: String) {
  action(id: $id) { executions(where: { role: "request", startedAfter: $since }, last: ${pageSize}, before: $before) {
    edges { node { startedAt endedAt status } } pageInfo { hasPreviousPage startCursor } } } }`;

// lastHour reads the requests of the last hour and draws them.
export async function lastHour(ctx, id) {
  const now = Date.now();
  const from = Math.floor(now / 60000) * 60000 - (minutes - 1) * 60000;
  const requests = [];
  let before = null;
  let more = false;
  for (let page = 0; page < pages; page++) {
    const data = await gql(query, {id, since: new Date(from).toISOString(), before}, {signal: ctx.signal});
    const connection = data.action.executions;
    requests.push(...connection.edges.map((e) => e.node));
    more = connection.pageInfo.hasPreviousPage;
    if (!more) break;
    before = connection.pageInfo.startCursor;
  }
  const buckets = bucket(requests, from);
  return h('div', {class: 'last-hour'},
    more ? note(`Only the latest ${requests.length} requests of the hour are drawn.`, 'capped') : null,
    h('div', {class: 'scroll'}, chart(buckets, from)));
}

// bucket sorts requests into minutes from the start of the window, each
// with its count, failures and the durations it saw.
function bucket(requests, from) {
  const buckets = Array.from({length: minutes}, () => ({count: 0, failed: 0, durations: []}));
  for (const r of requests) {
    const i = Math.floor((Date.parse(r.startedAt) - from) / 60000);
    if (i < 0 || i >= minutes) continue;
    const b = buckets[i];
    b.count++;
    if (r.status === 'FAILED') b.failed++;
    if (r.endedAt) b.durations.push(Date.parse(r.endedAt) - Date.parse(r.startedAt));
  }
  for (const b of buckets) {
    b.durations.sort((x, y) => x - y);
    b.p50 = rank(b.durations, 0.5);
    b.p95 = rank(b.durations, 0.95);
  }
  return buckets;
}

// rank is the nearest-rank percentile of sorted durations.
export function rank(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.max(Math.ceil(p * sorted.length) - 1, 0)];
}

const width = 960;
const left = 56;
const column = (width - left - 8) / minutes;
const rateTop = 18;
const rateHeight = 90;
const latencyTop = rateTop + rateHeight + 34;
const latencyHeight = 90;
const height = latencyTop + latencyHeight + 22;

function chart(buckets, from) {
  const most = Math.max(1, ...buckets.map((b) => b.count));
  const slowest = Math.max(1, ...buckets.map((b) => b.p95 ?? 0));
  const perRequest = rateHeight / most;
  const perMs = latencyHeight / slowest;
  return svg('svg', {class: 'chart', id: 'last-hour', viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `Requests per minute and their latency over the hour from ${new Date(from).toISOString()}`,
    dataset: {from: new Date(from).toISOString(), minute: column.toFixed(4), perRequest: perRequest.toPrecision(6), perMs: perMs.toPrecision(6)}},
  svg('text', {x: left, y: rateTop - 6, class: 'chart-title'}, `Requests per minute (most: ${most})`),
  frame(rateTop, rateHeight, String(most)),
  buckets.map((b, i) => bar(b, i, perRequest)),
  svg('text', {x: left, y: latencyTop - 6, class: 'chart-title'}, `Latency per minute: median and 95th percentile (slowest: ${slowest} ms)`),
  svg('text', {x: width - 8, y: latencyTop - 6, 'text-anchor': 'end', class: 'legend'},
    svg('tspan', {class: 'p50'}, '● median'), '   ', svg('tspan', {class: 'p95'}, '● 95th percentile')),
  frame(latencyTop, latencyHeight, `${slowest} ms`),
  line(buckets, 'p50', perMs), line(buckets, 'p95', perMs),
  svg('text', {x: left, y: height - 4, class: 'tick'}, new Date(from).toISOString().slice(11, 16) + 'Z'),
  svg('text', {x: width - 8, y: height - 4, class: 'tick', 'text-anchor': 'end'}, 'now'));
}

function frame(top, size, most) {
  return svg('g', {class: 'frame'},
    svg('line', {x1: left, x2: width - 8, y1: top + size, y2: top + size, stroke: 'currentColor'}),
    svg('line', {x1: left, x2: left, y1: top, y2: top + size, stroke: 'currentColor'}),
    svg('text', {x: left - 4, y: top + 10, 'text-anchor': 'end', class: 'tick'}, most),
    svg('text', {x: left - 4, y: top + size, 'text-anchor': 'end', class: 'tick'}, '0'));
}

function bar(b, i, perRequest) {
  if (!b.count) return null;
  const x = left + i * column + 1;
  const all = b.count * perRequest;
  const failed = b.failed * perRequest;
  return svg('g', {class: 'minute', dataset: {minute: i, count: b.count, failed: b.failed}},
    svg('rect', {class: 'requests', x: x.toFixed(2), y: (rateTop + rateHeight - all).toFixed(2), width: (column - 2).toFixed(2), height: all.toFixed(2)}),
    b.failed ? svg('rect', {class: 'failed', x: x.toFixed(2), y: (rateTop + rateHeight - failed).toFixed(2), width: (column - 2).toFixed(2), height: failed.toFixed(2)}) : null,
    svg('title', {}, `${b.count} requests, ${b.failed} failed; median ${b.p50 ?? '–'} ms, 95th percentile ${b.p95 ?? '–'} ms`));
}

// line joins the minutes that had requests; a point marks each.
function line(buckets, key, perMs) {
  const points = buckets.map((b, i) => (b[key] === null ? null : {i, ms: b[key],
    x: left + (i + 0.5) * column, y: latencyTop + latencyHeight - b[key] * perMs})).filter(Boolean);
  return svg('g', {class: 'latency ' + key},
    points.length > 1 ? svg('polyline', {points: points.map((p) => `${p.x.toFixed(2)},${p.y.toFixed(2)}`).join(' '), fill: 'none'}) : null,
    points.map((p) => svg('circle', {cx: p.x.toFixed(2), cy: p.y.toFixed(2), r: 3, dataset: {minute: p.i, ms: p.ms}})));
}
