// The activity chart: calls per second by outcome, one line each, as
// inline SVG. Every line also has its own dash pattern and a legend entry
// with its latest rate, so colour is never the only cue; the chart's
// description says the same in words for a screen reader.

import { h, s } from './dom.js';

const W = 640; // the drawing's coordinate system; it scales to the panel
const H = 220;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };

// nice rounds a peak up to 1, 2 or 5 × a power of ten, for the axis.
function nice(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmtRate(v) {
  return v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v === 0 ? '0' : v.toFixed(2);
}

// render returns the chart of an activity answer:
// {step_seconds, window_seconds, outcomes: [...], points: [{time, <outcome>: rate}, …]}.
export function render(act) {
  const outcomes = act.outcomes || [];
  const points = act.points || [];
  const windowMs = (act.window_seconds || 900) * 1000;
  const end = points.length ? Date.parse(points[points.length - 1].time) : Date.now();
  const start = end - windowMs;
  let peak = 0;
  for (const p of points) for (const o of outcomes) peak = Math.max(peak, Number(p[o]) || 0);
  const top = nice(peak);
  const x = (t) => PAD.left + ((t - start) / windowMs) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);

  const grid = [0, top / 2, top].map((v) => s('g', { class: 'grid' },
    s('line', { x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }),
    s('text', { x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, `${fmtRate(v)}/s`)));
  const ticks = [15, 10, 5, 0].map((min) => s('text', {
    class: 'tick', x: x(end - min * 60000), y: H - 8, 'text-anchor': min === 15 ? 'start' : min === 0 ? 'end' : 'middle',
  }, min === 0 ? 'now' : `−${min} min`));

  const lines = outcomes.map((o) => {
    const d = points
      .map((p, i) => `${i ? 'L' : 'M'}${x(Date.parse(p.time)).toFixed(1)} ${y(Number(p[o]) || 0).toFixed(1)}`)
      .join(' ');
    return d ? s('path', { class: `line out-${o}`, d, 'data-outcome': o, fill: 'none' }) : null;
  });

  // The legend gives each outcome's mean over the last minute (the last
  // point is the step under way, too short to read alone).
  const lastMinute = points.slice(-Math.max(1, Math.round(60 / (act.step_seconds || 5))));
  const recent = (o) => lastMinute.reduce((sum, p) => sum + (Number(p[o]) || 0), 0) / (lastMinute.length || 1);
  const summary = outcomes.map((o) => {
    const max = Math.max(0, ...points.map((p) => Number(p[o]) || 0));
    return `${o}: ${fmtRate(recent(o))}/s over the last minute, peak ${fmtRate(max)}/s`;
  }).join('; ');

  const svg = s('svg', {
    class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'chart-title chart-desc',
  },
  s('title', { id: 'chart-title' }, 'Calls per second by outcome, last 15 minutes'),
  s('desc', { id: 'chart-desc' }, points.length ? summary : 'No data yet.'),
  grid, ticks, lines);

  const legend = h('ul', { class: 'legend', 'aria-label': 'Outcomes, with their rate over the last minute' }, outcomes.map((o) => h('li', {},
    s('svg', { class: 'key', viewBox: '0 0 24 8', 'aria-hidden': 'true' },
      s('line', { class: `line out-${o}`, x1: 0, x2: 24, y1: 4, y2: 4 })),
    ` ${o} `, h('span', { class: 'muted' }, `${fmtRate(recent(o))}/s`))));
  return [svg, legend, h('p', { class: 'muted small' }, 'Rates beside the outcomes: the mean over the last minute.')];
}
