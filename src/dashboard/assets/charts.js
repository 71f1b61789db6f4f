// Health over time, per queue, drawn with uPlot (served from this server: /assets/uPlot.iife.min.js).
// The series come from /api/metrics (the per-minute rollup); they refresh every 10 s without a
// reload. Each chart's data stays on the uPlot instance, listed in window.leaseholdCharts for tests
// and for anyone curious in the console.
import { el } from './dom.js';

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

let range = 'hour';
let lastFetch = 0;
const charts = {};
window.leaseholdCharts = charts;
let container = null;

function seriesOf(q, name) {
  if (name === 'oldestClaimableS') return q.oldestClaimableMs.map((v) => (v === null ? null : v / 1000));
  return q[name];
}

function draw(box, q, chart, width) {
  const data = [q.minutes.map((m) => m / 1000), ...chart.series.map(([name]) => seriesOf(q, name))];
  const existing = charts[q.queue]?.[chart.key];
  if (existing) {
    existing.setData(data);
    if (Math.abs(existing.width - width) > 4) existing.setSize({ width, height: 120 });
    return;
  }
  const u = new window.uPlot(
    {
      width,
      height: 120,
      title: chart.title,
      scales: { x: { time: true } },
      axes: [
        { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,.2)' } },
        { stroke: 'currentColor', grid: { stroke: 'rgba(128,128,128,.2)' }, size: 40 },
      ],
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

/** Draws (or refreshes) every queue's charts into `section`. */
export async function healthCharts(section) {
  if (!window.uPlot || Date.now() - lastFetch < 10_000) return;
  lastFetch = Date.now();
  const res = await fetch(`/api/metrics?range=${range}`, { credentials: 'same-origin' });
  if (!res.ok) return;
  const data = await res.json();
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
  const width = Math.max(260, Math.min(520, section.clientWidth - 24));
  for (const q of data.queues) {
    let card = container.querySelector(`[data-chart-queue="${CSS.escape(q.queue)}"]`);
    if (!card) {
      card = el(
        'article',
        { class: 'card', 'data-chart-queue': q.queue },
        el('h3', {}, q.queue),
        ...CHARTS.map((c) => el('div', { class: 'chart', 'data-chart': c.key })),
        el('p', { class: 'note codes' }),
      );
      container.append(card);
    }
    const cardWidth = Math.max(220, Math.min(width, card.clientWidth - 16));
    for (const chart of CHARTS) draw(card.querySelector(`[data-chart="${chart.key}"]`), q, chart, cardWidth);
    const codes = Object.entries(q.retriesByCode).sort((a, b) => b[1] - a[1]);
    card.querySelector('.codes').textContent =
      `Retries by error code: ${codes.length ? codes.map(([c, n]) => `${c} ${n}`).join(', ') : 'none'}`;
  }
  section.dataset.drawn = String(Number(section.dataset.drawn || 0) + 1);
}
