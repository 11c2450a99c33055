// Small helpers to build the page: elements from text only (never HTML
// strings, so nothing a record holds can become markup), and formats.

export const $ = (id) => document.getElementById(id);

// h builds an element: h('td', {class: 'x'}, 'text', child, …). Attributes
// that are false, null or undefined are left out; "on…" functions become
// event listeners.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAll(el, attrs);
  el.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

const SVG = 'http://www.w3.org/2000/svg';

// s builds an SVG element the same way.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  setAll(el, attrs);
  el.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

function setAll(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

// replace swaps the children of the element with id for nodes, keeping
// the keyboard focus on the element with the same data-key if it had it
// (a refresh must not throw the focus back to the top of the page).
//
// Content that has not changed is left as it is, so a refresh does not
// churn the page under a pointer or a screen reader. (Event handlers are
// not compared: a view's handlers depend on its data alone.)
export function replace(id, ...nodes) {
  const host = $(id);
  const fresh = nodes.flat(Infinity).filter(Boolean);
  const before = [...host.childNodes];
  if (before.length === fresh.length && before.every((n, i) => n.isEqualNode(fresh[i]))) return;
  const active = document.activeElement;
  const key = active && host.contains(active) ? active.dataset.key : undefined;
  host.replaceChildren(...fresh);
  if (key) {
    const again = host.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

// time renders an RFC 3339 time as a <time> in the reader's zone, with
// milliseconds, and the date unless it is today.
export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('span', {}, iso);
  const today = new Date().toDateString() === d.toDateString();
  const clock = d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
  const text = today ? clock : `${d.toLocaleDateString()} ${clock}`;
  return h('time', { datetime: iso, title: iso }, text);
}

// duration renders milliseconds for a person: 850 ms, 12.3 s, 4 min 2 s.
export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  const min = Math.floor(ms / 60000);
  const sec = Math.round((ms % 60000) / 1000);
  if (min < 60) return `${min} min ${sec} s`;
  return `${Math.floor(min / 60)} h ${min % 60} min`;
}

// STATUS_LABELS are the words a person reads for the statuses whose API
// name is not already one (the badge's title keeps the API's name).
const STATUS_LABELS = { awaiting_approval: 'awaiting approval' };

// statusLabel is the word shown for status.
export function statusLabel(status) {
  return STATUS_LABELS[status] || status;
}

// badge is a status as a coloured word (the colour repeats the word; it
// never carries meaning alone).
export function badge(status) {
  const label = statusLabel(status);
  return h('span', { class: `badge st-${status}`, title: label === status ? null : status }, label);
}

// json renders a JSON value readably.
export function json(v) {
  return h('pre', { class: 'json' }, JSON.stringify(v, null, 2));
}
