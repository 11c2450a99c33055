// The console: state, the refresh loop and the actions. It speaks only the
// public API (api.js), so it shows what the token it holds may see.

import * as api from './api.js';
import { $, h, replace, statusLabel } from './dom.js';
import * as dialogs from './dialogs.js';
import * as views from './views.js';
import * as chart from './chart.js';
import * as ledger from './ledger.js';
import * as approvals from './approvals.js';

const REFRESH_MS = 5000; // between refreshes while they succeed
const MAX_BACKOFF_MS = 60000; // the longest wait after failures
const PAGE = 50; // records per page of the executions list

const state = {
  // What the token may do: null until known; then 'off' (auth off: all),
  // 'admin', or 'principal'.
  access: null,
  principal: '', // the principal's name, once a record shows it
  cluster: null, // the last GET /v1/cluster, when allowed
  attention: [],
  approvals: [], // the executions awaiting approval the token may see
  approvalsMore: false, // more await than one page holds
  expanded: new Set(), // the keys of long arguments shown in full
  executions: [],
  listed: false, // the executions list has loaded since the token was given
  next: '', // the listing's next cursor
  shown: PAGE, // how many records the list holds (refreshes keep it)
  selected: null, // the record the detail shows
  paused: false,
  failures: 0, // refreshes failed in a row (they back off)
  timer: 0,
  busy: false,
  again: false,
  needToken: false,
  toolsLoaded: false, // the tool filter is filled
  ctl: null, // aborts the refresh under way
};

// --- Refresh -------------------------------------------------------------------

// refresh reloads every panel once. A refresh asked for while one runs
// runs after it, not beside it; the next one is scheduled when this one
// ends: 5 s later, or later still after failures.
async function refresh() {
  if (state.busy) {
    state.again = true;
    return;
  }
  clearTimeout(state.timer);
  state.busy = true;
  const ctl = new AbortController(); // a new token aborts what the old one asked
  state.ctl = ctl;
  try {
    const errors = await loadAll(ctl.signal);
    if (ctl.signal.aborted) return;
    const auth = errors.find((e) => e.status === 401);
    if (auth) {
      askToken(auth);
      return;
    }
    // No answer, a server's failure, or "too many requests": wait longer.
    const failed = errors.filter((e) => e.status === 0 || e.status === 429 || e.status >= 500);
    if (failed.length) {
      state.failures++;
      const wait = backoff();
      alert(`Refresh failed: ${failed[0].describe()}. Trying again in ${Math.round(wait / 1000)} s.`);
    } else {
      if (state.failures) alert('');
      state.failures = 0;
      // Not in the live region: a screen reader is not told every 5 s.
      $('updated').textContent = `Updated ${new Date().toLocaleTimeString([], { hour12: false })}${state.paused ? ' (refresh paused)' : ''}.`;
    }
  } catch (e) { // a fault of the page itself, not an answer of the API
    alert(`The console failed to show the node's state: ${e.message}`);
    console.error(e);
  } finally {
    state.busy = false;
    if (state.again) {
      state.again = false;
      refresh();
    } else {
      schedule();
    }
  }
}

function backoff() {
  return Math.min(REFRESH_MS * 2 ** state.failures, MAX_BACKOFF_MS);
}

function schedule() {
  clearTimeout(state.timer);
  if (state.paused || state.needToken) return;
  state.timer = setTimeout(() => {
    if (document.hidden) return; // visibilitychange refreshes when seen again
    refresh();
  }, state.failures ? backoff() : REFRESH_MS);
}

// loadAll requests every panel's data together and renders each as it
// can; it returns the errors that are not a panel's to show.
async function loadAll(signal) {
  // The cluster first: whether it answers tells what the token may do,
  // which the other panels show (the principal column, say).
  const first = await Promise.allSettled([loadCluster(signal)]);
  const refused = first[0].status === 'rejected' ? first[0].reason : null;
  // A refused token is sent once, not once per panel: the node counts
  // failed authentications per address and stops listening to an
  // address that makes too many.
  if (refused && (refused.status === 401 || refused.aborted)) return [refused];
  const loads = [loadApprovals(signal), loadActivity(signal), loadAttention(signal), loadExecutions(signal), loadDetail(signal), loadLedger(signal)];
  if (!state.toolsLoaded) loads.push(loadTools(signal));
  const results = await Promise.allSettled(loads);
  const errors = [...first, ...results].filter((r) => r.status === 'rejected').map((r) => r.reason);
  for (const e of errors) if (!(e instanceof api.ApiError)) throw e;
  return errors;
}

// A panel that answers 403 says what token it needs rather than failing.
function forbidden(panel, e, what) {
  if (e instanceof api.ApiError && e.status === 403) {
    replace(panel, h('p', { class: 'notice' }, `Admin token needed: ${what}. ${e.describe()}`));
    return true;
  }
  return false;
}

function panelError(panel, e) {
  replace(panel, h('p', { class: 'error' }, e.describe ? e.describe() : String(e)));
}

async function loadCluster(signal) {
  try {
    state.cluster = await api.get('v1/cluster', signal);
    setAccess(api.token() ? 'admin' : 'off');
    replace('cluster-body', views.cluster(state.cluster, removeNode));
    // A fleet on PostgreSQL has no membership to change.
    $('add-node').hidden = state.cluster.store === 'postgres';
  } catch (e) {
    if (e.aborted) throw e;
    state.cluster = null;
    $('add-node').hidden = true;
    if (e.status === 401) throw e;
    if (forbidden('cluster-body', e, 'this token may not see the cluster')) {
      setAccess('principal');
      return;
    }
    if (e.status === 404) { // a node on its own, not part of a cluster
      setAccess(api.token() ? 'admin' : 'off');
      replace('cluster-body', h('p', { class: 'muted' }, e.message));
      return;
    }
    panelError('cluster-body', e);
    throw e;
  }
}

// loadLedger shows the audit ledger's head (admin only; a node without a
// ledger says so).
async function loadLedger(signal) {
  try {
    const head = await api.get('v1/audit/head', signal);
    replace('ledger-head', h('p', {}, `Head: seq ${head.seq}, hash `, h('code', { class: 'mono' }, head.hash)));
    $('ledger-verify').hidden = false;
  } catch (e) {
    if (e.aborted || e.status === 401) throw e;
    $('ledger-verify').hidden = true;
    if (forbidden('ledger-head', e, 'only an admin may read the audit ledger')) return;
    if (e.status === 404) { // a node that keeps no ledger
      replace('ledger-head', h('p', { class: 'muted' }, e.message));
      return;
    }
    panelError('ledger-head', e);
    throw e;
  }
}

// verifyLedger recomputes the ledger's chain in the browser (ledger.js)
// and says how far it verifies, and whether it reaches the node's head.
async function verifyLedger() {
  const out = $('ledger-status');
  if (!ledger.canVerify()) {
    out.textContent = 'This browser offers SHA-256 only to pages served over HTTPS or from localhost: verify an export with carmy audit verify.';
    return;
  }
  const button = $('ledger-verify');
  button.disabled = true;
  out.textContent = 'Verifying…';
  try {
    const r = await ledger.verify(api.getText, (n) => { out.textContent = `Verifying… ${n} entries checked.`; });
    const from = r.anchor ? `from the checkpoint of seq ${r.anchor.seq} (taken as given)` : 'from the first entry';
    if (!r.ok) {
      out.textContent = `Does not verify: seq ${r.bad.seq}: ${r.bad.reason} (the ${r.entries} entries before it verify, ${from}).`;
      return;
    }
    const head = await api.get('v1/audit/head');
    const reach = head.seq === r.head.seq && head.hash === r.head.hash
      ? 'up to the node\'s head' : `up to seq ${r.head.seq}; the head is now seq ${head.seq} (entries appended since)`;
    out.textContent = `Verified: ${r.entries} entries ${from}, ${reach}. Checkpoint signatures: carmy audit verify --public-key.`;
  } catch (e) {
    out.textContent = `Could not verify: ${e.describe ? e.describe() : String(e)}`;
  } finally {
    button.disabled = false;
  }
}

async function loadActivity(signal) {
  try {
    const act = await api.get('v1/activity', signal);
    $('node').textContent = act.node_id ? `Node ${act.node_id}` : '';
    replace('activity-body', chart.render(act));
  } catch (e) {
    if (e.aborted || e.status === 401) throw e;
    if (forbidden('activity-body', e, 'this token may not see the node\'s activity')) return;
    panelError('activity-body', e);
    throw e;
  }
}

async function loadAttention(signal) {
  try {
    const page = await api.get('v1/executions' + api.query({ attention: true, all_sessions: true, limit: 500 }), signal);
    state.attention = page.executions || [];
    const n = state.attention.length;
    $('attention-count').textContent = page.next_cursor ? `${n}+` : String(n);
    $('attention-count').classList.toggle('hot', n > 0);
    replace('attention-body', views.executions(state.attention, {
      admin: isAdmin(), caption: 'Executions that need attention', onOpen: openDetail, nodeNote,
      emptyText: 'Nothing needs attention.',
    }));
    learnPrincipal(state.attention);
  } catch (e) {
    if (e.aborted || e.status === 401) throw e;
    panelError('attention-body', e);
    throw e;
  }
}

// --- Pending approvals ---------------------------------------------------------

// loadApprovals lists the executions awaiting approval that the token may
// see or decide on (its own, and for an approver, the calls of others it
// is asked to decide); the panel shows, first on the page, only while
// there are some. (Its records are not all the token's own: the
// principal is not learnt from them.)
async function loadApprovals(signal) {
  try {
    const page = await api.get('v1/executions' + api.query({ approvals: true, limit: 500 }), signal);
    state.approvals = page.executions || [];
    state.approvalsMore = Boolean(page.next_cursor);
    renderApprovals();
  } catch (e) {
    if (e.aborted || e.status === 401) throw e;
    $('approvals').hidden = false;
    panelError('approvals-body', e);
    throw e;
  }
}

function renderApprovals() {
  const n = state.approvals.length;
  $('approvals').hidden = n === 0;
  $('approvals-count').textContent = state.approvalsMore ? `${n}+` : String(n);
  replace('approvals-body', n === 0 ? [] : approvals.queue(state.approvals, {
    canDecide, onApprove: approveExecution, onDeny: denyExecution, onOpen: openDetail,
    isExpanded: (id) => state.expanded.has(id),
    onExpand: (id, open) => { expand(id, open); renderApprovals(); },
    now: Date.now(),
  }));
}

// expand keeps the long arguments of key shown in full (open) or not.
function expand(key, open) {
  if (open) state.expanded.add(key);
  else state.expanded.delete(key);
}

// canDecide: whether to offer the decisions on r. The admin may decide on
// any call but its own (the API says so if it is); a principal, on the
// calls of others whose tool lists it as an approver. A principal's queue
// holds only its own calls and those it approves, so while its name is
// not known (the executions list, once loaded, showed none of its own) every call there is
// another's. The API decides in the end: a wrong offer is refused (403).
function canDecide(r) {
  if (isAdmin()) return true;
  const list = (r.approval && r.approval.approvers) || [];
  if (!state.principal) return state.listed && state.approvals.some((a) => a.execution_id === r.execution_id);
  return r.principal !== state.principal && list.includes(state.principal);
}

// refusal explains why the API refused a decision on r, after its code
// and message.
function refusal(r, e) {
  const why = e.describe ? e.describe() : String(e);
  if (e.status === 409) {
    const now = e.fields && e.fields.status ? ` it is now ${statusLabel(e.fields.status)}` : '';
    return `${why}. It was decided already or expired:${now || ' it no longer awaits a decision'}.`;
  }
  if (e.status === 403) return `${why}. A caller may not decide on its own call; only ${approvals.approversText(r)} may.`;
  if (e.status === 404) return `${why}. This token may not see the execution, or it is no longer recorded.`;
  return why;
}

function approveExecution(r, button) {
  const name = r.request_id || r.execution_id;
  dialogs.confirm({
    title: `Approve ${name}?`,
    text: `${r.tool} runs once, now, with the arguments shown, as the call of ${r.principal || 'its principal'} `
      + `(session ${r.session_id || '""'}). Its outcome is recorded and replayed to every retry of the call. `
      + 'An approval cannot be taken back.',
    label: 'Approve',
    danger: false,
    returnTo: button,
    onRefused: refresh, // the page then shows the state that refused it
    explain: (e) => refusal(r, e),
    run: () => api.post(`v1/executions/${encodeURIComponent(r.execution_id)}/approve`),
  }).then((rec) => decided(r, rec, 'Approved'));
}

function denyExecution(r, button) {
  const name = r.request_id || r.execution_id;
  dialogs.confirm({
    title: `Deny ${name}?`,
    text: `${r.tool} does not run. denied is recorded and replayed to every retry of the call, with the error `
      + 'APPROVAL_DENIED and the reason you give. A denial cannot be taken back.',
    label: 'Deny',
    returnTo: button,
    field: { label: 'Reason (optional)', hint: 'Kept with the decision, and told to every retry of the call.', maxLength: 1024 },
    onRefused: refresh,
    explain: (e) => refusal(r, e),
    run: (reason) => api.post(`v1/executions/${encodeURIComponent(r.execution_id)}/deny`, reason ? { reason } : undefined),
  }).then((rec) => decided(r, rec, 'Denied'));
}

// decided follows a decision on r: rec is the API's answer (undefined when
// the person went back). The call leaves the queue at once; the detail, if
// it shows r, shows the new record.
function decided(r, rec, verb) {
  if (rec === undefined) return;
  const name = r.request_id || r.execution_id;
  status(`${verb} ${name}: it is now ${statusLabel(rec.status)}.`);
  state.approvals = state.approvals.filter((a) => a.execution_id !== r.execution_id);
  renderApprovals();
  if (state.selected && state.selected.execution_id === rec.execution_id) {
    state.selected = rec;
    renderDetail();
  }
  // The button that opened the dialog has gone with its row.
  if (!document.activeElement || document.activeElement === document.body) {
    ($('approvals').hidden ? $('executions-h') : $('approvals-h')).focus();
  }
  refresh();
}

// filters returns the listing's query from the filter form. An empty
// session means every session the token may see.
function filters() {
  const session = $('f-session').value.trim();
  return {
    status: $('f-status').value,
    tool: $('f-tool').value,
    session_id: session,
    all_sessions: session === '',
    principal: isAdmin() ? $('f-principal').value.trim() : '',
  };
}

async function loadExecutions(signal) {
  try {
    const page = await api.get('v1/executions' + api.query({ ...filters(), limit: Math.min(state.shown, 500) }), signal);
    state.executions = page.executions || [];
    state.next = page.next_cursor || '';
    renderExecutions();
    learnPrincipal(state.executions);
    if (!state.listed) {
      state.listed = true;
      renderApprovals(); // canDecide may now tell a principal's own calls
    }
  } catch (e) {
    if (e.aborted || e.status === 401) throw e;
    panelError('executions-body', e);
    throw e;
  }
}

async function loadMore() {
  try {
    const page = await api.get('v1/executions' + api.query({ ...filters(), limit: PAGE, cursor: state.next }));
    state.executions.push(...(page.executions || []));
    state.shown = state.executions.length;
    state.next = page.next_cursor || '';
    renderExecutions();
  } catch (e) {
    alert(`Loading more failed: ${e.describe ? e.describe() : e}`);
  }
}

function renderExecutions() {
  replace('executions-body', views.executions(state.executions, {
    admin: isAdmin(), caption: 'Executions, newest first', onOpen: openDetail, nodeNote,
    emptyText: 'No executions match.',
  }));
  $('more').hidden = !state.next;
}

async function loadDetail(signal) {
  if (!state.selected) return;
  try {
    const r = await api.get(`v1/executions/${encodeURIComponent(state.selected.execution_id)}`, signal);
    if (!state.selected || state.selected.execution_id !== r.execution_id) return; // closed or another opened meanwhile
    state.selected = r;
  } catch (e) {
    if (e.aborted || e.status === 401) throw e;
    if (e.status === 404) {
      // An approver reads another's call in the queue only: show it from there.
      const queued = state.approvals.find((a) => a.execution_id === state.selected.execution_id);
      if (queued) {
        state.selected = queued;
        renderDetail();
        return;
      }
      // released, removed by retention, or (for an approver) decided
      replace('detail-body', h('p', { class: 'muted' }, `This token may no longer see this execution: it was released or removed, or it was another principal's call, shown to its approvers only while it awaited a decision. ${e.describe()}`));
      return;
    }
    throw e;
  }
  renderDetail();
}

// --- Who is signed in --------------------------------------------------------------

function isAdmin() {
  return state.access === 'admin' || state.access === 'off';
}

function setAccess(access) {
  state.access = access;
  $('f-principal-field').hidden = !isAdmin();
  const who = {
    off: 'Authentication is off on this node: everything is visible.',
    admin: 'Signed in with the admin token: everything is visible.',
    principal: `Signed in as ${state.principal ? `principal “${state.principal}”` : 'a principal'}: its own executions only.`,
  }[access];
  $('who').textContent = who;
  $('sign-out').hidden = !api.token();
  $('sign-in').hidden = true;
}

function learnPrincipal(records) {
  if (state.access !== 'principal' || state.principal) return;
  const r = records.find((x) => x.principal);
  if (r) {
    state.principal = r.principal;
    setAccess('principal');
    renderApprovals();
  }
}

// askToken stops the refreshes and asks for a token; err is the 401.
function askToken(err) {
  state.needToken = true;
  clearTimeout(state.timer);
  $('sign-in').hidden = false;
  $('sign-out').hidden = !api.token();
  $('who').textContent = 'Not signed in.';
  // What the last token could see is not left on the screen.
  for (const id of ['cluster-body', 'activity-body', 'attention-body', 'executions-body', 'ledger-head']) {
    replace(id, h('p', { class: 'muted' }, 'Sign in to see this.'));
  }
  state.approvals = [];
  $('approvals').hidden = true;
  replace('approvals-body');
  $('ledger-verify').hidden = true;
  $('ledger-status').textContent = '';
  $('attention-count').textContent = '0';
  $('attention-count').classList.remove('hot');
  $('add-node').hidden = true;
  $('more').hidden = true;
  $('detail').hidden = true;
  status('This node needs a token.');
  dialogs.showError('token-error', api.token() ? `That token was refused: ${err.describe()}` : '');
  const d = $('token-dialog');
  d.dataset.asked = String(Number(d.dataset.asked || 0) + 1); // how many times it asked (tests wait on it)
  if (!d.open) dialogs.open(d, { focus: $('token-input') });
}

function signIn(ev) {
  ev.preventDefault();
  const t = $('token-input').value.trim();
  if (!t) {
    dialogs.showError('token-error', 'Give a token.');
    return;
  }
  api.setToken(t);
  $('token-input').value = '';
  $('token-dialog').close();
  reset();
  refresh();
}

function signOut() {
  api.clearToken();
  reset();
  refresh();
}

// reset forgets what the previous token could see, and drops what it
// asked that has not answered yet.
function reset() {
  if (state.ctl) state.ctl.abort();
  Object.assign(state, {
    access: null, principal: '', cluster: null, attention: [], approvals: [], approvalsMore: false, expanded: new Set(),
    executions: [], listed: false, next: '', selected: null,
    failures: 0, needToken: false, toolsLoaded: false,
  });
  $('detail').hidden = true;
  $('who').textContent = '';
  $('node').textContent = '';
  alert('');
}

// --- The detail and its actions ----------------------------------------------------------

// nodeState is what the cluster says of a node: its gossip state, 'gone'
// when it is no member, or '' when the cluster is not visible.
function nodeState(id) {
  if (!state.cluster || !id) return '';
  const n = state.cluster.nodes.find((m) => m.id === id);
  return n ? (n.gossip || n.heartbeat) : 'gone';
}

// nodeNote says when a running record's node is dead or gone.
function nodeNote(r) {
  if (r.status !== 'running') return null;
  const ns = nodeState(r.node_id);
  return ns === 'dead' ? 'node dead' : ns === 'gone' ? 'node gone' : null;
}

// resolvable: interrupted, or running on a node that is dead or gone (the
// attention list says so for a token that cannot see the cluster).
function resolvable(r) {
  if (r.status === 'interrupted') return true;
  if (r.status !== 'running') return false;
  const ns = nodeState(r.node_id);
  return ns === 'dead' || ns === 'gone' || state.attention.some((a) => a.execution_id === r.execution_id);
}

let detailOpener = null;

function openDetail(r, button) {
  detailOpener = button;
  state.selected = r;
  renderDetail();
  $('detail').hidden = false;
  $('detail-h').focus();
  loadDetail().catch((e) => alert(`Loading the execution failed: ${e.describe ? e.describe() : e}`));
}

function closeDetail() {
  state.selected = null;
  $('detail').hidden = true;
  const key = detailOpener && detailOpener.dataset.key;
  const again = key && document.querySelector(`[data-key="${CSS.escape(key)}"]`);
  (again || $('executions-h')).focus();
}

function renderDetail() {
  const r = state.selected;
  $('detail-h').textContent = `Execution ${r.request_id || r.execution_id}`;
  const decide = r.status === 'awaiting_approval' && canDecide(r);
  const argsKey = `detail-${r.execution_id}`;
  replace('detail-body', views.detail(r, {
    nodeState: nodeState(r.node_id),
    cancel: r.status === 'running' ? cancelExecution : null,
    resolve: resolvable(r) ? openResolve : null,
    approve: decide ? (button) => approveExecution(r, button) : null,
    deny: decide ? (button) => denyExecution(r, button) : null,
    argsExpanded: state.expanded.has(argsKey),
    onArgsToggle: (open) => { expand(argsKey, open); renderDetail(); },
  }));
}

function cancelExecution(button) {
  const r = state.selected;
  dialogs.confirm({
    title: `Cancel ${r.request_id || r.execution_id}?`,
    text: 'cancelled is recorded at once and replayed to every retry; the tool is told to stop on the node that runs it, '
      + 'and whatever it returns afterwards is discarded. An effect it already made is not undone.',
    label: 'Cancel execution',
    returnTo: button,
    onRefused: refresh, // the page then shows the state that refused it
    run: () => api.post(`v1/executions/${encodeURIComponent(r.execution_id)}/cancel`),
  }).then((rec) => done(rec, `Cancelled ${r.request_id || r.execution_id}.`));
}

const RESOLVE_TEXT = {
  completed: 'completed: the data you gave is recorded as the tool\'s result, marked resolved, and replayed to every retry; the tool does not run again.',
  failed: 'failed: the error you gave is recorded, marked resolved, and replayed to every retry; the tool does not run again.',
  released: 'released: the reservation is removed and the next retry runs the tool again. Choose it only if you know the tool\'s effect did not happen.',
};

function outcome() {
  return document.querySelector('#resolve-form input[name=outcome]:checked').value;
}

function showOutcome() {
  const o = outcome();
  $('resolve-completed').hidden = o !== 'completed';
  $('resolve-failed').hidden = o !== 'failed';
}

let resolveOpener = null;

function openResolve(button) {
  const r = state.selected;
  resolveOpener = button;
  $('resolve-what').textContent = `${r.request_id || r.execution_id} (tool ${r.tool}, session ${r.session_id || '""'}, on ${r.node_id}): ${r.status}.`;
  dialogs.showError('resolve-data-error', '');
  dialogs.showError('resolve-failed-error', '');
  showOutcome();
  dialogs.open($('resolve-dialog'), { returnTo: button, focus: document.querySelector('#resolve-form input[name=outcome]:checked') });
}

// The resolution is checked here before anything is sent: the data must
// be JSON; a failure needs a code and a message.
function continueResolve(ev) {
  ev.preventDefault();
  const r = state.selected;
  const o = outcome();
  let body;
  if (o === 'completed') {
    const text = $('resolve-data').value.trim();
    try {
      JSON.parse(text);
    } catch (e) {
      dialogs.showError('resolve-data-error', `The data is not valid JSON: ${e.message}`);
      $('resolve-data').setAttribute('aria-invalid', 'true');
      $('resolve-data').focus();
      return;
    }
    $('resolve-data').removeAttribute('aria-invalid');
    body = `{"status":"completed","data":${text}}`; // the JSON as written, numbers unrounded
  } else if (o === 'failed') {
    const code = $('resolve-code').value.trim();
    const message = $('resolve-message').value.trim();
    if (!code || !message) {
      dialogs.showError('resolve-failed-error', 'A failure needs an error code and a message.');
      (code ? $('resolve-message') : $('resolve-code')).focus();
      return;
    }
    body = JSON.stringify({ status: 'failed', error: { code, message } });
  } else {
    body = JSON.stringify({ status: 'released' });
  }
  $('resolve-dialog').close();
  dialogs.confirm({
    title: `Resolve ${r.request_id || r.execution_id} as ${o}?`,
    text: RESOLVE_TEXT[o],
    label: `Resolve as ${o}`,
    danger: o === 'released',
    returnTo: resolveOpener,
    onRefused: refresh, // the page then shows the state that refused it
    run: () => api.postText(`v1/executions/${encodeURIComponent(r.execution_id)}/resolve`, body),
  }).then((rec) => done(rec, `Resolved ${r.request_id || r.execution_id} as ${o}.`));
}

// done follows a confirmed action: rec is its answer (undefined when the
// person went back).
function done(rec, message) {
  if (rec === undefined) return;
  status(message);
  if (rec && rec.released) { // the record is gone: say so in the detail
    state.selected = null;
    replace('detail-body', h('p', {}, 'Released: the reservation is removed; the next retry runs the tool again.'));
  } else if (rec && rec.execution_id) {
    state.selected = rec;
    renderDetail();
  }
  refresh();
}

// --- Cluster membership ------------------------------------------------------------

function openAddNode(ev) {
  dialogs.showError('node-error', '');
  dialogs.open($('node-dialog'), { returnTo: ev.currentTarget, focus: $('node-id') });
}

function continueAddNode(ev) {
  ev.preventDefault();
  const spec = { id: $('node-id').value.trim(), raft_addr: $('node-raft').value.trim(), http_addr: $('node-http').value.trim() };
  if (!spec.id || !spec.raft_addr || !spec.http_addr) {
    dialogs.showError('node-error', 'A node needs an id, a Raft address and an HTTP address.');
    return;
  }
  $('node-dialog').close();
  const known = state.cluster && state.cluster.nodes.some((n) => n.id === spec.id);
  dialogs.confirm({
    title: `Add node ${spec.id}?`,
    text: `${spec.id} becomes a voter at Raft address ${spec.raft_addr} (HTTP ${spec.http_addr}): the leader adds it to the Raft `
      + 'configuration and sends it the log.'
      + (known ? ` A node ${spec.id} is already a member: its addresses are replaced by these.` : ''),
    label: 'Add node',
    danger: false,
    returnTo: $('add-node'),
    onRefused: refresh, // the page then shows the state that refused it
    run: () => api.post('v1/cluster/nodes', spec),
  }).then((c) => {
    if (c === undefined) return;
    for (const id of ['node-id', 'node-raft', 'node-http']) $(id).value = '';
    done(null, `Added node ${spec.id}.`);
  });
}

function removeNode(n, button) {
  const voters = state.cluster ? state.cluster.nodes.filter((m) => m.suffrage === 'voter').length : 0;
  const after = n.suffrage === 'voter' && voters ? ` The cluster goes from ${voters} voters to ${voters - 1}` : '';
  dialogs.confirm({
    title: `Remove node ${n.id}?`,
    text: `${n.id} is removed from the Raft configuration: it no longer votes or receives the log, and it leaves this list.`
      + `${after ? `${after}, and a majority of those must stay up.` : ''} Its process keeps running until you stop it; `
      + 'its interrupted or running executions stay recorded and may be resolved.',
    label: 'Remove node',
    returnTo: button,
    onRefused: refresh, // the page then shows the state that refused it
    run: () => api.del(`v1/cluster/nodes/${encodeURIComponent(n.id)}`),
  }).then((c) => {
    if (c === undefined) return;
    done(null, `Removed node ${n.id}.`);
    $('cluster-h').focus({ preventScroll: true });
  });
}

// --- Messages --------------------------------------------------------------------------

function status(text) {
  $('status').textContent = text;
}

// alert shows text in the page's alert region (hidden when empty).
function alert(text) {
  $('alert-text').textContent = text;
  $('alert').hidden = !text;
}

// --- Start -----------------------------------------------------------------------------

// loadTools fills the tool filter with the tools the token may call.
async function loadTools(signal) {
  try {
    const { tools } = await api.get('v1/tools', signal);
    const select = $('f-tool');
    const chosen = select.value;
    select.replaceChildren(h('option', { value: '' }, 'any'), ...tools.map((t) => h('option', {}, t.name)));
    select.value = chosen;
    state.toolsLoaded = true;
  } catch {
    // the filter keeps "any" and the next refresh tries again; the
    // other panels report the error
  }
}

function togglePause() {
  state.paused = !state.paused;
  const b = $('refresh-toggle');
  b.classList.toggle('paused', state.paused);
  b.textContent = state.paused ? 'Resume refresh' : 'Pause refresh';
  status(state.paused ? 'Refresh paused.' : 'Refresh resumed.');
  if (state.paused) clearTimeout(state.timer);
  else refresh();
}

function start() {
  $('token-form').addEventListener('submit', signIn);
  $('sign-in').addEventListener('click', () => askToken(new api.ApiError(401, 'UNAUTHORIZED', 'a token is needed')));
  $('sign-out').addEventListener('click', signOut);
  $('refresh-toggle').addEventListener('click', togglePause);
  $('refresh-now').addEventListener('click', () => { state.failures = 0; state.toolsLoaded = false; refresh(); });
  $('alert-close').addEventListener('click', () => alert(''));
  $('filters').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.shown = PAGE;
    refresh();
  });
  $('filters').addEventListener('reset', () => setTimeout(() => { state.shown = PAGE; refresh(); }));
  $('more').addEventListener('click', loadMore);
  $('detail-close').addEventListener('click', closeDetail);
  $('add-node').addEventListener('click', openAddNode);
  $('ledger-verify').addEventListener('click', verifyLedger);
  $('node-form').addEventListener('submit', continueAddNode);
  $('resolve-form').addEventListener('submit', continueResolve);
  $('resolve-form').addEventListener('change', showOutcome);
  $('token-dialog').addEventListener('close', () => {
    if (state.needToken) status('Not signed in: choose “Sign in” to give a token.');
  });
  dialogs.wire();
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && !state.paused && !state.needToken) refresh();
  });
  refresh();
}

start();
