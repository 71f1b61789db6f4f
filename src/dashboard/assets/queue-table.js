// The queues' gauges table, shared by the overview (every queue, a sparkline each) and a queue's
// own page (its one row): counts from lh.stats(), throttled time, and pause and resume.
import { age, el, postJson, readOnly, say } from './dom.js';
import { sparkline } from './sparkline.js';

async function setPaused(queue, paused) {
  const res = await postJson(`/api/queues/${encodeURIComponent(queue)}/${paused ? 'pause' : 'resume'}`);
  say(res.ok ? (paused ? 'paused ' : 'resumed ') + queue : `failed: ${res.body.error}`);
  window.dispatchEvent(new Event('leasehold:render'));
}

// A limited queue's throttled time and claims (lh.configureQueue's rateLimit, concurrencyLimit);
// empty for a queue without limits.
function throttled(t) {
  if (!t) return '';
  const now = t.throttledForMs > 0 ? 'now, ' : '';
  return `${now}${(t.throttledMs / 1000).toFixed(1)} s in ${t.throttledClaims} claims`;
}

// The last hour of one queue as two sparklines, in a button that shows the queue in the chart.
function trend(q, series, chart) {
  if (!series) return el('td', { 'data-field': 'trend', class: 'note' }, 'no samples yet');
  const oldest = series.oldestClaimableMs.map((v) => (v === null ? null : v / 1000));
  const done = series.completed.reduce((a, v) => a + v, 0);
  const worst = oldest.reduce((a, v) => (v === null ? a : Math.max(a, v)), 0);
  return el(
    'td',
    { 'data-field': 'trend' },
    el(
      'button',
      {
        type: 'button',
        class: 'trend',
        'aria-pressed': String(chart.selected === q.queue),
        'aria-label': `Chart ${q.queue}`,
        onclick: () => chart.select(q.queue),
      },
      sparkline('throughput', series.completed, `${q.queue}: ${done} completed in the last hour`),
      sparkline('oldest', oldest, `${q.queue}: oldest claimable up to ${age(worst * 1000)} in the last hour`),
    ),
  );
}

/**
 * One queue's row. `series` is its last hour from /api/metrics and `chart` the overview's chart
 * selection ({ selected, select }); without them (a queue's own page) the row has no trend cell.
 */
export function queueRow(q, series, chart) {
  const toggle = el(
    'button',
    {
      class: q.paused ? 'resume' : 'pause',
      type: 'button',
      disabled: readOnly,
      title: readOnly ? 'read-only access' : undefined,
      'aria-label': (q.paused ? 'Resume ' : 'Pause ') + q.queue,
      onclick: () => setPaused(q.queue, !q.paused),
    },
    q.paused ? 'Resume' : 'Pause',
  );
  const selected = chart && chart.selected === q.queue;
  return el(
    'tr',
    {
      'data-queue': q.queue,
      class: q.paused ? 'paused' : q.unattended ? 'unattended' : '',
      // The state rides on the row's trend button (aria-pressed); the row only shows it.
      'data-selected': chart ? String(selected) : undefined,
    },
    el('th', { scope: 'row' }, el('a', { href: `/queues/${encodeURIComponent(q.queue)}` }, q.queue)),
    el('td', { class: 'num', 'data-field': 'pending' }, q.pending + (q.capped ? '+' : '')),
    el('td', { class: 'num', 'data-field': 'running' }, q.running),
    el('td', { class: `num${q.dead > 0 ? ' bad' : ''}`, 'data-field': 'dead' }, q.dead),
    el('td', { class: 'num', 'data-field': 'oldest' }, age(q.oldestClaimableAgeMs)),
    el('td', { class: 'num', 'data-field': 'expiring' }, q.leasesExpiringSoon),
    el('td', { class: 'num', 'data-field': 'completed' }, q.completedInWindow),
    chart ? trend(q, series, chart) : null,
    el('td', { class: 'num', 'data-field': 'throttled' }, throttled(q.throttle)),
    el(
      'td',
      { 'data-field': 'state', class: q.unattended ? 'bad' : '' },
      q.paused ? 'paused' : q.unattended ? 'no worker: work waits, none running' : '',
    ),
    el('td', {}, toggle),
  );
}

/** The table's header cells, with the trend column when `withTrend`. */
export function queueHead(withTrend) {
  return [
    'queue',
    'pending',
    'running',
    'dead',
    'oldest claimable',
    'leases near expiry',
    'completed / min',
    withTrend ? 'last hour: completed, oldest claimable' : null,
    'throttled',
    'state',
    '',
  ]
    .filter((h) => h !== null)
    .map((h) => el('th', { scope: 'col' }, h));
}
