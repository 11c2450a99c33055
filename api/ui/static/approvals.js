// The approval queue and a gated record's gate and decision, built from
// API answers (docs/console.md). Like views.js, these functions only build
// elements, from text (arguments are JSON shown as text, never markup);
// app.js owns the state, the requests and the actions.

import { h, time, badge, statusLabel } from './dom.js';

// Arguments longer than these are shown collapsed, with a button to show
// them all.
const PREVIEW_LINES = 12;
const PREVIEW_CHARS = 800;

// timeLeft says how long a gate has before it expires, at now (ms).
export function timeLeft(expiresAt, now) {
  const ms = Date.parse(expiresAt) - now;
  if (!Number.isFinite(ms)) return '';
  if (ms <= 0) return 'expired: it is recorded expired within a few seconds';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s left`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min left`;
  const hours = Math.floor(min / 60);
  if (hours < 48) return `${hours} h ${min % 60} min left`;
  return `${Math.floor(hours / 24)} days left`;
}

// approversText names who may decide on r: its approvers, and the admin.
export function approversText(r) {
  const list = (r.approval && r.approval.approvers) || [];
  return list.length ? `${list.join(', ')} (or the admin)` : 'the admin';
}

// args renders a gated call's arguments as pretty-printed JSON text. Long
// ones are cut to a preview unless expanded; toggle(open) is called by the
// button that shows or hides the rest. key names the button (data-key) so
// that a refresh keeps the focus on it.
export function args(value, { expanded, toggle, key, label }) {
  if (value === undefined) return h('p', { class: 'muted' }, 'The record holds no arguments.');
  const text = JSON.stringify(value, null, 2);
  const lines = text.split('\n');
  const long = lines.length > PREVIEW_LINES || text.length > PREVIEW_CHARS;
  if (!long) return h('pre', { class: 'json args', 'aria-label': label }, text);
  let preview = lines.slice(0, PREVIEW_LINES).join('\n');
  if (preview.length > PREVIEW_CHARS) preview = preview.slice(0, PREVIEW_CHARS);
  const id = `args-${key}`;
  return h('div', { class: 'args-long' },
    h('pre', { class: 'json args', id, 'aria-label': label }, expanded ? text : `${preview}\n…`),
    h('button', {
      type: 'button', class: 'small', 'data-key': `expand-${key}`,
      'aria-expanded': String(Boolean(expanded)), 'aria-controls': id,
      onclick: () => toggle(!expanded),
    }, expanded ? 'Show less' : `Show all the arguments (${lines.length} lines, ${text.length.toLocaleString()} characters)`));
}

// queue renders the executions awaiting approval, soonest to expire first.
// opts: canDecide(r) tells whether to offer the decisions (else why not is
// said), onApprove(r, button) and onDeny(r, button) take them, onOpen(r,
// button) opens the record's detail, isExpanded(id) and onExpand(id,
// open) keep long arguments shown, now is the time left is counted from.
export function queue(records, opts) {
  const sorted = [...records].sort((a, b) => Date.parse(a.approval?.expires_at) - Date.parse(b.approval?.expires_at));
  return h('ul', { class: 'approvals' }, sorted.map((r) => item(r, opts)));
}

function item(r, { canDecide, onApprove, onDeny, onOpen, isExpanded, onExpand, now }) {
  const id = r.execution_id;
  const gate = r.approval || {};
  const name = r.request_id || id;
  const decide = canDecide(r);
  return h('li', { class: 'approval', 'data-execution': id },
    h('h3', {}, h('span', { class: 'tool' }, r.tool), ' ', badge(r.status)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Principal'), h('dd', { 'data-field': 'principal' }, r.principal || h('span', { class: 'muted' }, '—')),
      h('dt', {}, 'Session'), h('dd', { class: 'mono', 'data-field': 'session_id' }, r.session_id || h('span', { class: 'muted' }, '""')),
      h('dt', {}, 'Request'), h('dd', { 'data-field': 'request_id' }, h('button', {
        type: 'button', class: 'link', 'data-key': `approval-open-${id}`, title: id,
        onclick: (ev) => onOpen(r, ev.currentTarget),
      }, name)),
      h('dt', {}, 'Reserved'), h('dd', {}, time(r.started_at)),
      h('dt', {}, 'Expires'), h('dd', { 'data-field': 'expires_at' }, time(gate.expires_at),
        h('span', { class: 'muted' }, ` (${timeLeft(gate.expires_at, now)})`)),
      h('dt', {}, 'Approvers'), h('dd', {}, approversText(r))),
    h('h4', {}, 'Arguments'),
    args(gate.arguments, {
      expanded: isExpanded(id), toggle: (open) => onExpand(id, open), key: id, label: `Arguments of ${name}`,
    }),
    decide
      ? h('div', { class: 'actions' },
        h('button', {
          type: 'button', class: 'primary', 'data-key': `approve-${id}`, 'aria-label': `Approve ${name} (${r.tool})…`,
          onclick: (ev) => onApprove(r, ev.currentTarget),
        }, 'Approve…'),
        h('button', {
          type: 'button', class: 'danger', 'data-key': `deny-${id}`, 'aria-label': `Deny ${name} (${r.tool})…`,
          onclick: (ev) => onDeny(r, ev.currentTarget),
        }, 'Deny…'))
      : h('p', { class: 'muted' }, `Awaiting a decision by ${approversText(r)}; a caller may not decide on its own call.`));
}

// gate renders a record's "approval" member for its detail: who may
// decide and until when, the arguments, and the decision once taken (who,
// when, what it led to, and the reason given).
export function gate(r, { expanded, toggle }) {
  const g = r.approval || {};
  const d = g.decision;
  const facts = [
    h('dt', {}, 'Approvers'), h('dd', {}, approversText(r)),
    h('dt', {}, 'Expires'), h('dd', {}, time(g.expires_at), h('span', { class: 'muted mono' }, ` ${g.expires_at || ''}`)),
  ];
  if (d) {
    facts.push(
      h('dt', {}, 'Decision'), h('dd', { 'data-field': 'decision' }, badge(d.status), ` ${decisionText(d)}`),
      h('dt', {}, 'Decided by'), h('dd', { 'data-field': 'decided_by' }, d.by || h('span', { class: 'muted' }, '—')),
      h('dt', {}, 'Decided at'), h('dd', {}, time(d.at), h('span', { class: 'muted mono' }, ` ${d.at}`)),
      h('dt', {}, 'Reason'), h('dd', { 'data-field': 'reason' }, d.reason || h('span', { class: 'muted' }, 'none given')));
  } else {
    facts.push(h('dt', {}, 'Decision'), h('dd', { 'data-field': 'decision' }, h('span', { class: 'muted' }, 'none yet')));
  }
  return h('div', { class: 'gate' },
    h('dl', { class: 'facts' }, facts),
    g.arguments !== undefined
      ? [h('h4', {}, 'Arguments'), args(g.arguments, { expanded, toggle, key: `detail-${r.execution_id}`, label: 'Arguments of the call' })]
      : null);
}

// decisionText says what a decision did.
function decisionText(d) {
  switch (d.status) {
    case 'running': return 'approved: the tool ran (or runs) once';
    case 'denied': return 'denied: the tool did not run';
    case 'expired': return 'no decision before the expiry: the tool did not run';
    default: return statusLabel(d.status);
  }
}

// steps are the timeline's steps of a gated record: the wait, then the
// decision. step(label, at, text) builds one; finished tells whether the
// decision ended the execution (denied or expired), so the timeline need
// not add a step of its own for the end.
export function steps(r, step) {
  const g = r.approval;
  if (!g) return { items: [], finished: false };
  const items = [];
  const d = g.decision;
  if (!d) {
    items.push(step('awaiting', null, `awaiting approval by ${approversText(r)}, until ${new Date(g.expires_at).toLocaleString()}: the tool has not run`));
    return { items, finished: false };
  }
  const by = d.by ? ` by ${d.by}` : '';
  const reason = d.reason ? `: “${d.reason}”` : '';
  if (d.status === 'running') items.push(step('approved', d.at, `approved${by}${reason}; the tool runs once`));
  else if (d.status === 'denied') items.push(step('denied', d.at, `denied${by}${reason}; the tool did not run`));
  else items.push(step('expired', d.at, 'no one decided before the approval expired; the tool did not run'));
  return { items, finished: d.status !== 'running' };
}
