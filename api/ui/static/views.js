// What the panels show, built from API answers. These functions only
// build elements; app.js owns the state, the requests and the actions.

import { h, time, duration, badge, json } from './dom.js';
import * as approvals from './approvals.js';

// --- Cluster ---------------------------------------------------------------

// cluster renders GET /v1/cluster; onRemove(node, button) is offered per
// member (the cluster routes are the admin's, so whoever sees this may).
export function cluster(c, onRemove) {
  if (c.store === 'postgres') return fleet(c);
  const leader = c.leader ? c.leader.id : null;
  const used = c.capacity ? c.entries / c.capacity : 0;
  const facts = h('dl', { class: 'facts' },
    h('dt', {}, 'Leader'),
    h('dd', { id: 'leader' }, leader ? h('strong', {}, leader) : h('span', { class: 'warn' }, 'none known'),
      c.leader && c.leader.http_addr ? h('span', { class: 'muted' }, ` at ${c.leader.http_addr}`) : null),
    h('dt', {}, 'Commit index'), h('dd', {}, String(c.commit_index)),
    h('dt', {}, 'Applied index'), h('dd', {}, String(c.applied_index),
      c.applied_index < c.commit_index ? h('span', { class: 'muted' }, ` (${c.commit_index - c.applied_index} behind)`) : null),
    h('dt', {}, 'Records'), h('dd', {},
      h('meter', { min: 0, max: c.capacity || 1, value: c.entries, high: (c.capacity || 1) * 0.8, 'aria-label': 'records against capacity' }),
      ` ${c.entries.toLocaleString()} of ${c.capacity.toLocaleString()} (${(used * 100).toFixed(1)} %)`),
    ...versionFacts(c.nodes || []));

  const nodes = [...(c.nodes || [])].sort((a, b) => a.id.localeCompare(b.id, undefined, { numeric: true }));
  const rows = nodes.map((n) => h('tr', {},
    h('th', { scope: 'row' }, n.id, n.id === leader ? h('span', { class: 'tag' }, 'leader') : null),
    h('td', {}, n.suffrage),
    h('td', {}, h('span', { class: `badge gossip-${n.gossip}` }, n.gossip)),
    h('td', { class: 'mono addrs' }, h('span', {}, `raft ${n.raft_addr}`), h('span', {}, `http ${n.http_addr}`)),
    h('td', { class: 'mono' }, n.version || '–'),
    h('td', {}, h('button', {
      type: 'button', class: 'small', 'data-key': `remove-${n.id}`,
      'aria-label': `Remove node ${n.id}`, onclick: (ev) => onRemove(n, ev.currentTarget),
    }, 'Remove…'))));
  const table = scroller('Cluster members', h('table', {},
    h('caption', {}, `Members (${rows.length})`),
    h('thead', {}, h('tr', {}, ['Node', 'Suffrage', 'Gossip', 'Addresses', 'Version'].map((t) => h('th', { scope: 'col' }, t)),
      h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
    h('tbody', {}, rows)));
  return [facts, table];
}

// fleet renders GET /v1/cluster of a node whose store is PostgreSQL: the
// database as this node reaches it, and the nodes by their heartbeats (no
// leader, no membership to change).
function fleet(c) {
  const db = c.database || {};
  const used = c.capacity ? c.entries / c.capacity : 0;
  const facts = h('dl', { class: 'facts' },
    h('dt', {}, 'Store'), h('dd', { id: 'store' }, h('strong', {}, 'PostgreSQL'),
      h('span', { class: 'muted' }, ' (no leader: the nodes share the database)')),
    h('dt', {}, 'Database'), h('dd', { id: 'database' }, db.reachable
      ? h('span', {}, h('span', { class: 'badge gossip-alive' }, 'reachable'), ` PostgreSQL ${db.version || '?'}`,
        db.schema ? h('span', { class: 'muted' }, `, schema ${db.schema}`) : null)
      : h('span', { class: 'badge gossip-dead' }, 'unreachable')),
    h('dt', {}, 'Records'), h('dd', {},
      h('meter', { min: 0, max: c.capacity || 1, value: c.entries, high: (c.capacity || 1) * 0.8, 'aria-label': 'records against capacity' }),
      ` ${c.entries.toLocaleString()} of ${c.capacity.toLocaleString()} (${(used * 100).toFixed(1)} %)`),
    ...versionFacts(c.nodes || []));
  const nodes = [...(c.nodes || [])].sort((a, b) => a.id.localeCompare(b.id, undefined, { numeric: true }));
  const rows = nodes.map((n) => h('tr', {},
    h('th', { scope: 'row' }, n.id),
    h('td', {}, h('span', { class: `badge gossip-${n.heartbeat}` }, n.heartbeat)),
    h('td', {}, n.last_heartbeat ? time(n.last_heartbeat) : '–'),
    h('td', { class: 'mono addrs' }, h('span', {}, `http ${n.http_addr}`)),
    h('td', { class: 'mono' }, n.version || '')));
  const table = scroller('Fleet nodes', h('table', {},
    h('caption', {}, `Nodes (${rows.length})`),
    h('thead', {}, h('tr', {}, ['Node', 'Heartbeat', 'Last heartbeat', 'Address', 'Version'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows)));
  return [facts, table];
}

// versionFacts returns the "Version" fact of a cluster: the one version its
// nodes run, or, flagged, each version and its nodes when they differ (a
// rolling upgrade under way, or a node left behind). Nodes whose version
// is not known yet are left out.
function versionFacts(nodes) {
  const byVersion = new Map();
  for (const n of nodes) {
    if (!n.version) continue;
    if (!byVersion.has(n.version)) byVersion.set(n.version, []);
    byVersion.get(n.version).push(n.id);
  }
  if (byVersion.size === 0) return [];
  if (byVersion.size === 1) return [h('dt', {}, 'Version'), h('dd', { id: 'version', class: 'mono' }, [...byVersion.keys()][0])];
  const list = [...byVersion].map(([v, ids]) => `${v} (${ids.sort().join(', ')})`).join('; ');
  return [h('dt', {}, 'Version'), h('dd', { id: 'version' },
    h('span', { class: 'warn', 'data-key': 'mixed-versions' }, 'mixed versions'),
    h('span', { class: 'muted' }, ` ${list}: finish the upgrade, or run one build on every node`))];
}

// --- Executions --------------------------------------------------------------

// table renders records newest first; onOpen(record, button) opens one.
// admin adds the principal column; nodeNote(record) may add a word on the
// record's node (a running record whose node is dead, say).
export function executions(records, { admin, caption, onOpen, emptyText, nodeNote = () => null }) {
  if (!records.length) return h('p', { class: 'muted' }, emptyText);
  const cols = ['Request', 'Status', 'Tool', 'Session', admin ? 'Principal' : null, 'Node', 'Started', 'Took'].filter(Boolean);
  const rows = records.map((r) => h('tr', {},
    h('th', { scope: 'row' }, h('button', {
      type: 'button', class: 'link', 'data-key': `open-${r.execution_id}`,
      title: r.execution_id, onclick: (ev) => onOpen(r, ev.currentTarget),
    }, r.request_id || r.execution_id)),
    h('td', {}, badge(r.status), r.resolved ? h('span', { class: 'tag' }, 'resolved') : null),
    h('td', {}, r.tool),
    h('td', { class: 'mono' }, r.session_id || h('span', { class: 'muted' }, '""')),
    admin ? h('td', {}, r.principal || '') : null,
    h('td', {}, r.node_id || '', nodeNote(r) ? h('span', { class: 'tag warn' }, nodeNote(r)) : null),
    h('td', {}, time(r.started_at)),
    h('td', {}, took(r))));
  return scroller(caption, h('table', {},
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', {}, h('tr', {}, cols.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows)));
}

function took(r) {
  const start = Date.parse(r.started_at);
  if (r.finished_at) return duration(Date.parse(r.finished_at) - start);
  if (r.status === 'running') return h('span', { class: 'muted' }, `${duration(Date.now() - start)} so far`);
  return '';
}

// A wide table scrolls sideways on its own on a narrow screen; the
// scrolling region is focusable so a keyboard can scroll it too.
function scroller(label, table) {
  return h('div', { class: 'scroll', role: 'region', 'aria-label': label, tabindex: 0 }, table);
}

// --- One execution -------------------------------------------------------------

// The fields of a record, in the order they are shown; any other field the
// node sends is shown after them.
const FIELDS = ['execution_id', 'request_id', 'session_id', 'principal', 'tool', 'status', 'resolved',
  'resolved_by', 'node_id', 'started_at', 'finished_at', 'fingerprint', 'data', 'error', 'approval'];

// detail renders a record: every field, its timeline and what may be done
// with it. actions: {cancel, resolve, approve, deny} functions or null
// when not offered, and nodeState, what the cluster says of the record's
// node; argsExpanded and onArgsToggle(open) keep a gated call's long
// arguments shown.
export function detail(r, { cancel, resolve, approve, deny, nodeState, argsExpanded, onArgsToggle }) {
  const keys = [...FIELDS.filter((k) => k in r), ...Object.keys(r).filter((k) => !FIELDS.includes(k))];
  const fields = h('dl', { class: 'fields' }, keys.map((k) => [
    h('dt', {}, k),
    h('dd', { 'data-field': k }, k === 'approval'
      ? approvals.gate(r, { expanded: argsExpanded, toggle: onArgsToggle || (() => {}) })
      : value(k, r[k])),
  ]));
  const button = (fn, cls, id, text) => (fn ? h('button', { type: 'button', class: cls, id, onclick: (ev) => fn(ev.currentTarget) }, text) : null);
  const actions = h('div', { class: 'actions' },
    button(approve, 'primary', 'do-approve', 'Approve…'),
    button(deny, 'danger', 'do-deny', 'Deny…'),
    button(cancel, 'danger', 'do-cancel', 'Cancel execution…'),
    button(resolve, 'primary', 'do-resolve', 'Resolve…'),
    !cancel && !resolve && !approve && !deny ? h('p', { class: 'muted' }, nothingToDo(r)) : null);
  return [
    h('div', { class: 'detail-grid' },
      h('div', {}, h('h3', {}, 'Timeline'), timeline(r, nodeState), actions),
      h('div', {}, h('h3', {}, 'Fields'), fields)),
  ];
}

function value(k, v) {
  if (k === 'status') return badge(v);
  if (k.endsWith('_at')) return h('span', {}, time(v), h('span', { class: 'muted mono' }, ` ${v}`));
  if (v !== null && typeof v === 'object') return json(v);
  if (k === 'data') return json(v);
  return h('span', { class: 'mono' }, v === '' ? '""' : String(v));
}

function nothingToDo(r) {
  if (r.status === 'awaiting_approval') return `Awaiting approval by ${approvals.approversText(r)}: the caller may not decide on its own call.`;
  if (r.status === 'running') return 'Running: it may be cancelled by whoever may see it.';
  if (r.status === 'interrupted') return '';
  return `Finished (${r.status}): its result is replayed to every retry; nothing is left to do.`;
}

// timeline lists what the record tells of the execution's life, with
// times: reserved and started; then finished or resolved, or still
// running, or interrupted.
export function timeline(r, nodeState) {
  const start = Date.parse(r.started_at);
  const gated = approvals.steps(r, step);
  const items = [r.approval
    ? step('reserved', r.started_at, `reserved on ${r.node_id || 'a node'}; its tool needs approval`)
    : step('started', r.started_at, `reserved and started on ${r.node_id || 'a node'}`), ...gated.items];
  if (r.finished_at && !gated.finished) { // (a denial's or expiry's step says how it ended)
    const by = r.resolved_by === 'probe' ? ' by a reconcile probe (it asked the upstream)'
      : r.resolved_by ? ` by ${r.resolved_by}` : '';
    const what = r.resolved ? `resolved as ${r.status}${by}` : r.status;
    items.push(step(r.resolved ? 'resolved' : 'finished', r.finished_at,
      `${what}, ${duration(Date.parse(r.finished_at) - start)} after it started`));
  } else if (r.status === 'running') {
    const gone = nodeState === 'dead' || nodeState === 'gone';
    items.push(step('running', null, gone
      ? `still marked running, but its node ${r.node_id} is ${nodeState === 'gone' ? 'no longer a member' : 'dead'}: it may be resolved`
      : `running for ${duration(Date.now() - start)} so far`));
  } else if (r.status === 'interrupted') {
    items.push(step('interrupted', null, `its runner, ${r.node_id}, died or restarted, or the tool's answer was lost, before it finished: whether the tool's effect happened is unknown`));
  }
  return h('ol', { class: 'timeline' }, items);
}

function step(label, at, text) {
  return h('li', { class: `tl-${label}` }, h('strong', {}, label), ' ', at ? time(at) : null, h('br'), h('span', { class: 'muted' }, text));
}
