// A request's call tree on a time axis, as tracing tools draw spans: one
// row per execution in lineage order, indented by depth, each bar starting
// where the call started and as long as it ran, so that what took the time
// shows at a glance.
import {svg} from '../dom.js';
import {link} from '../app.js';

const width = 960;
const labelWidth = 260;
const rowHeight = 22;
const axisHeight = 26;
const barArea = width - labelWidth - 16;

// waterfall draws e and the calls beneath it that the page has loaded.
export function waterfall(e) {
  const rows = spans(e);
  const start = Date.parse(e.startedAt);
  const end = Math.max(...rows.map((r) => r.end));
  const span = Math.max(end - start, 1);
  const scale = barArea / span;
  const height = axisHeight + rows.length * rowHeight + 4;
  return svg('svg', {class: 'waterfall', id: 'waterfall', viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `${rows.length} executions over ${span} ms`, dataset: {msPerUnit: (1 / scale).toPrecision(6)}},
  axis(span),
  rows.map((r, i) => row(r, i, start, scale)));
}

// spans lists the executions depth first with their depth and times; a
// call still running ends now.
function spans(e) {
  const out = [];
  const now = Date.now();
  const walk = (x, depth) => {
    const started = Date.parse(x.startedAt);
    out.push({x, depth, start: started, end: x.endedAt ? Date.parse(x.endedAt) : now});
    (x.calls || []).forEach((c) => c.actionName !== undefined && walk(c, depth + 1));
  };
  walk(e, 0);
  return out;
}

function axis(span) {
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => {
    const x = labelWidth + f * barArea;
    return svg('g', {class: 'tick'},
      svg('line', {x1: x, x2: x, y1: axisHeight - 6, y2: axisHeight - 1, stroke: 'currentColor'}),
      svg('text', {x, y: axisHeight - 10, 'text-anchor': f === 0 ? 'start' : f === 1 ? 'end' : 'middle'}, label(f * span)));
  });
  return svg('g', {class: 'axis'},
    svg('line', {x1: labelWidth, x2: labelWidth + barArea, y1: axisHeight - 1, y2: axisHeight - 1, stroke: 'currentColor'}),
    ticks);
}

function label(ms) {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

function row(r, i, origin, scale) {
  const y = axisHeight + i * rowHeight;
  const duration = r.end - r.start;
  const name = r.x.actionName + (r.depth === 0 && r.x.mcpRequest ? ' ' + r.x.mcpRequest.method : '');
  return svg('a', {href: link(['execution', r.x.id]), class: 'span-link'},
    svg('g', {class: 'span status-' + String(r.x.status).toLowerCase(), dataset: {execution: r.x.id, depth: r.depth}},
      svg('text', {x: 4 + r.depth * 14, y: y + 15, class: 'span-name'}, name),
      svg('rect', {class: 'bar', x: (labelWidth + (r.start - origin) * scale).toFixed(2), y: y + 4,
        width: Math.max(duration * scale, 1).toFixed(2), height: rowHeight - 8, rx: 2},
      svg('title', {}, `${name}: ${label(duration)}, ${r.x.status}`))));
}
