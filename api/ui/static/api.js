// The node's HTTP API, as the console calls it: the bearer token the user
// gave (kept in this tab's session storage, never in a cookie), JSON in
// and out, and every failure as an ApiError carrying the envelope's code
// and message.

const TOKEN_KEY = 'carmy.token';

// The API's base: the console is served at <base>/ui/, so a proxy that
// serves the node under a prefix keeps working.
const base = new URL('../', location.href);

export class ApiError extends Error {
  constructor(status, code, message, fields) {
    super(message);
    this.status = status; // HTTP status; 0 when the node did not answer
    this.code = code;
    this.fields = fields || {};
  }

  // What a person reads: "INVALID_STATE (409): the message".
  describe() {
    const status = this.status ? ` (${this.status})` : '';
    return `${this.code}${status}: ${this.message}`;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  sessionStorage.setItem(TOKEN_KEY, t);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

// REQUEST_TIMEOUT_MS bounds every request of the console.
const REQUEST_TIMEOUT_MS = 20000;

// request sends method path (relative to the API's base, e.g.
// "v1/cluster") with body, a JSON text or undefined, and returns the
// answer's JSON (its text when raw, for NDJSON). It throws an ApiError
// for a refusal or no answer (with aborted set when signal, an
// AbortSignal, ended it).
export async function request(method, path, body, signal, raw) {
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  // A request without an answer in REQUEST_TIMEOUT_MS fails, so that one
  // stuck request cannot stop the console from refreshing.
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const init = {
    method, headers, credentials: 'omit', cache: 'no-store',
    signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
  };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = body;
  }
  let resp;
  let text;
  try {
    resp = await fetch(new URL(path, base), init);
    text = await resp.text();
  } catch (e) {
    const why = timeout.aborted ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : e.message;
    const err = new ApiError(0, 'NO_ANSWER', `the node did not answer (${why})`);
    err.aborted = Boolean(signal && signal.aborted);
    throw err;
  }
  if (raw && resp.ok) return text;
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: reported below from the text
  }
  if (!resp.ok) {
    const env = json && typeof json.error === 'object' ? json.error : null;
    if (env && env.code) throw new ApiError(resp.status, env.code, env.message || '', env);
    throw new ApiError(resp.status, `HTTP_${resp.status}`, text.slice(0, 200) || resp.statusText);
  }
  return json;
}

export const get = (path, signal) => request('GET', path, undefined, signal);
export const getText = (path, signal) => request('GET', path, undefined, signal, true);
export const post = (path, value) => request('POST', path, value === undefined ? undefined : JSON.stringify(value));
export const postText = (path, text) => request('POST', path, text);
export const del = (path) => request('DELETE', path);

// query builds "?a=b&…" from the non-empty values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== '' && v !== undefined && v !== null && v !== false) q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}
