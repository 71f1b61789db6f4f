// Health over time, drawn with uPlot (served by the dashboard itself: assets/uPlot.iife.min.js).
// The series come from /api/metrics (the per-minute rollup) and refresh every 10 s without a
// reload. The overview draws one chart, for the queue selected in its table; a queue's own page
// draws its four. Each chart's data stays on the uPlot instance, listed in window.leaseholdCharts
// (per queue and chart) and window.leaseholdSelectedChart for tests and the curious.
import { el, getJson } from './dom.js';

const CHARTS = [
  { key: 'throughput', title: 'Completed / min', series: [['completed', 'completed']] },
  { key: 'oldest', title: 'Oldest claimable (s)', series: [['oldestClaimableS', 'age']] },
  {
    key: 'leases',
    title: 'Running and near lease expiry',
    series: [
      ['running', 'running'],
      ['nearExpiry', 'near expiry'],
    ],
  },
  {
    key: 'failures',
    title: 'Retries, dead, lease expirations, refused writes / min',
    series: [
      ['retried', 'retried'],
      ['dead', 'dead'],
      ['leaseExpired', 'lease expired'],
      ['refused', 'refused'],
    ],
  },
];
const COLOURS = ['#2a7de1', '#d9480f', '#2b8a3e', '#9c36b5'];
const AXIS = { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,.2)' } };
const REFRESH_MS = 10_000;

const charts = {};
window.leaseholdCharts = charts;

function seriesOf(q, name) {
  if (name === 'oldestClaimableS') return q.oldestClaimableMs.map((v) => (v === null ? null : v / 1000));
  return q[name];
}

function widthOf(box, max) {
  return Math.max(220, Math.min(max, (box.clientWidth || max) - 16));
}

// The last hour of every queue, fetched at most every 10 s (the overview polls every 2 s).
let hour = { at: 0, byQueue: new Map() };

/**
 * Every queue's last hour (queue name to its series), refreshed at most every 10 s. A failed read
 * keeps the last one (the gauges must not wait on the history), and is tried again in 10 s.
 */
export async function hourMetrics() {
  if (Date.now() - hour.at >= REFRESH_MS) {
    hour.at = Date.now();
    try {
      const data = await getJson('/api/metrics?range=hour');
      hour = { at: hour.at, byQueue: new Map(data.queues.map((q) => [q.queue, q])) };
    } catch {}
  }
  return hour.byQueue;
}

let selected = null;

/** Draws (or refreshes) the overview's one chart: `series`' completions and oldest claimable age. */
export function selectedChart(box, series) {
  if (!window.uPlot) return;
  const data = [series.minutes.map((m) => m / 1000), series.completed, seriesOf(series, 'oldestClaimableS')];
  const width = widthOf(box, 1100);
  if (selected && selected.queue === series.queue && box.contains(selected.chart.root)) {
    selected.chart.setData(data);
    if (Math.abs(selected.chart.width - width) > 4) selected.chart.setSize({ width, height: 180 });
    return;
  }
  selected?.chart.destroy();
  box.replaceChildren();
  const chart = new window.uPlot(
    {
      width,
      height: 180,
      title: `${series.queue}: completed / min and oldest claimable (s), last hour`,
      scales: { x: { time: true }, n: {}, s: {} },
      axes: [
        AXIS,
        { ...AXIS, scale: 'n', size: 40 },
        { ...AXIS, scale: 's', side: 1, size: 50, grid: { show: false } },
      ],
      series: [
        {},
        { label: 'completed / min', scale: 'n', stroke: COLOURS[0], width: 2, spanGaps: false },
        { label: 'oldest claimable (s)', scale: 's', stroke: COLOURS[1], width: 2, spanGaps: false },
      ],
    },
    data,
    box,
  );
  selected = { queue: series.queue, chart };
  window.leaseholdSelectedChart = selected;
}

function draw(box, q, chart, width) {
  const data = [q.minutes.map((m) => m / 1000), ...chart.series.map(([name]) => seriesOf(q, name))];
  const existing = charts[q.queue]?.[chart.key];
  if (existing) {
    existing.setData(data);
    if (Math.abs(existing.width - width) > 4) existing.setSize({ width, height: 140 });
    return;
  }
  const u = new window.uPlot(
    {
      width,
      height: 140,
      title: chart.title,
      scales: { x: { time: true } },
      axes: [AXIS, { ...AXIS, size: 40 }],
      series: [
        {},
        ...chart.series.map(([, label], i) => ({ label, stroke: COLOURS[i], width: 2, spanGaps: false })),
      ],
    },
    data,
    box,
  );
  charts[q.queue] = charts[q.queue] || {};
  charts[q.queue][chart.key] = u;
}

let range = 'hour';
let lastFetch = 0;
let container = null;

function rangeControl() {
  return el(
    'div',
    { class: 'range', role: 'group', 'aria-label': 'Chart range' },
    ['hour', 'day'].map((r) =>
      el(
        'button',
        {
          type: 'button',
          'data-range': r,
          'aria-pressed': String(r === range),
          onclick: () => {
            range = r;
            lastFetch = 0;
            for (const k of Object.keys(charts)) delete charts[k];
            container = null;
          },
        },
        `Last ${r}`,
      ),
    ),
  );
}

/** Draws (or refreshes) one queue's four health charts into `section` (the queue's own page). */
export async function queueCharts(section, queue) {
  if (!window.uPlot || Date.now() - lastFetch < REFRESH_MS) return;
  lastFetch = Date.now();
  const data = await getJson(`/api/metrics?range=${range}&queue=${encodeURIComponent(queue)}`);
  if (!container) {
    container = el('div', { id: 'charts' });
    section.replaceChildren(
      el('h2', { id: 'h-health' }, 'Health over time'),
      rangeControl(),
      el(
        'p',
        { class: 'note' },
        'Per minute, from the metrics rollup (docs/dashboard.md). Gaps: not sampled.',
      ),
      container,
    );
  }
  const q = data.queues.find((s) => s.queue === queue);
  if (!q) {
    container.replaceChildren(el('p', { class: 'note', id: 'charts-none' }, 'no samples for this queue yet'));
    return;
  }
  let card = container.querySelector(`[data-chart-queue="${CSS.escape(q.queue)}"]`);
  if (!card) {
    card = el(
      'article',
      { class: 'card', 'data-chart-queue': q.queue },
      ...CHARTS.map((c) => el('div', { class: 'chart', 'data-chart': c.key })),
      el('p', { class: 'note codes' }),
    );
    container.replaceChildren(card);
  }
  const width = widthOf(section, 560);
  for (const chart of CHARTS) draw(card.querySelector(`[data-chart="${chart.key}"]`), q, chart, width);
  const codes = Object.entries(q.retriesByCode).sort((a, b) => b[1] - a[1]);
  card.querySelector('.codes').textContent =
    `Retries by error code: ${codes.length ? codes.map(([c, n]) => `${c} ${n}`).join(', ') : 'none'}`;
  section.dataset.drawn = String(Number(section.dataset.drawn || 0) + 1);
}
