// Building the page from data without markup: every value an agent or an
// instance sent is text, never HTML (the policy allows no HTML sink).

// h makes an element: h('a', {href: '#/x', class: 'c'}, 'text', child).
// An attribute whose value is null, undefined or false is left out; on*
// attributes are listeners.
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// svg makes an SVG element as h makes an HTML one: drawings are built from
// data the same way, attributes and text only.
export function svg(tag, attrs, ...children) {
  return build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'dataset') {
      for (const [k, v] of Object.entries(value)) if (v !== undefined && v !== null) el.dataset[k] = String(v);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// json renders a value as indented JSON text.
export function json(value) {
  if (value === undefined) return '';
  return JSON.stringify(value, null, 2);
}

export function pre(value, cls) {
  return h('pre', {class: cls || 'json', tabindex: 0}, typeof value === 'string' ? value : json(value));
}

export function time(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return h('time', {datetime: ts, title: ts}, d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z'));
}

// duration is how long an execution ran, or that it still runs.
export function duration(start, end) {
  if (!end) return 'running';
  const ms = new Date(end) - new Date(start);
  if (ms < 1000) return ms + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
}

export function badge(text, kind) {
  return h('span', {class: 'badge ' + (kind || String(text).toLowerCase().replace(/[^a-z_]/g, ''))}, text);
}

export function section(title, ...children) {
  const id = 'sec-' + title.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  return h('section', {'aria-labelledby': id}, h('h2', {id}, title), children);
}

// table renders rows with a header; columns are [title, cell(row)].
export function table(columns, rows, opts = {}) {
  const head = h('tr', {}, columns.map(([title]) => h('th', {scope: 'col'}, title)));
  const body = h('tbody', {}, rows.map((row) => {
    const tr = h('tr', opts.rowAttrs ? opts.rowAttrs(row) : {}, columns.map(([title, cell]) => h('td', {'data-label': title}, cell(row))));
    return tr;
  }));
  return h('div', {class: 'scroll'}, h('table', {class: opts.class || ''}, opts.caption ? h('caption', {}, opts.caption) : null, h('thead', {}, head), body));
}

export function field(label, control) {
  return h('label', {class: 'field'}, h('span', {}, label), control);
}

export function note(text, cls) {
  return h('p', {class: 'note ' + (cls || '')}, text);
}
