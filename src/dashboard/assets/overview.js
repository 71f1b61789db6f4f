// The overview: one table of every queue's gauges (polled every 2 s) with its throttled time, pause
// and resume and a sparkline each of its last hour (completions, oldest claimable age); one chart
// of the queue selected in the table; blocked ordering keys, cron schedules (pause and resume) and
// the latest operator actions. A queue's detailed charts are on its own page (queue.js).
import { hourMetrics, selectedChart } from './charts.js';
import { age, el, field, fill, getJson, main, postJson, readOnly, say, time } from './dom.js';
import { queueHead, queueRow } from './queue-table.js';

let skeleton = null;
// The queue drawn in the chart (null: the first listed) and the name filter typed above the table.
const chart = { selected: null, select: null };
let filter = '';

async function setSchedulePaused(name, paused) {
  const res = await postJson(`/api/schedules/${encodeURIComponent(name)}/${paused ? 'pause' : 'resume'}`);
  say(res.ok ? `${paused ? 'paused' : 'resumed'} schedule ${name}` : `failed: ${res.body.error}`);
  window.dispatchEvent(new Event('leasehold:render'));
}

function blockedTable(keys) {
  if (keys.length === 0) {
    return el('p', { class: 'note', id: 'blocked-none' }, 'none: no ordering key waits behind a dead job');
  }
  return el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      { id: 'blocked' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ['queue', 'key', 'dead head', 'blocked for', 'waiting', 'error'].map((h) =>
            el('th', { scope: 'col' }, h),
          ),
        ),
      ),
      el(
        'tbody',
        {},
        keys.map((k) =>
          el(
            'tr',
            { 'data-key': k.orderingKey },
            el('td', {}, k.queue),
            el('td', {}, k.orderingKey),
            el('td', {}, el('a', { href: `/jobs/${encodeURIComponent(k.headJobId)}` }, k.headJobId)),
            el('td', { class: 'num' }, age(k.blockedMs)),
            el('td', { class: 'num' }, k.waiting),
            el('td', {}, k.lastErrorCode ?? ''),
          ),
        ),
      ),
    ),
  );
}

// Cron schedules (lh.schedule): when each fires next, when it last fired and the job it made, its
// jobs (the search's schedule filter), and pause/resume. Payloads are never sent to the page.
function scheduleTable(schedules) {
  if (schedules.length === 0) {
    return el('p', { class: 'note', id: 'schedules-none' }, 'none: no cron schedule (lh.schedule) exists');
  }
  const head = ['schedule', 'cron', 'zone', 'enqueues to', 'next tick', 'last tick', 'last job', 'state', ''];
  return el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      { id: 'schedules' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          head.map((h) => el('th', { scope: 'col' }, h)),
        ),
      ),
      el(
        'tbody',
        {},
        schedules.map((s) =>
          el(
            'tr',
            { 'data-schedule': s.name, class: s.paused ? 'paused' : '' },
            el(
              'th',
              { scope: 'row' },
              el(
                'a',
                {
                  href: `/search?schedule=${encodeURIComponent(s.name)}`,
                  title: `jobs made by ${s.name}`,
                },
                s.name,
              ),
            ),
            el('td', { 'data-field': 'cron' }, s.cron),
            el('td', {}, s.timezone || 'UTC'),
            el('td', {}, s.task ? `task ${s.task}` : `queue ${s.queue}`),
            el('td', { 'data-field': 'next' }, s.nextTickAt ? time(s.nextTickAt) : ''),
            el('td', { 'data-field': 'last' }, s.lastTickAt ? time(s.lastTickAt) : 'never'),
            el(
              'td',
              { 'data-field': 'last-job' },
              s.lastJobId ? el('a', { href: `/jobs/${encodeURIComponent(s.lastJobId)}` }, s.lastJobId) : '',
            ),
            el('td', { 'data-field': 'state' }, s.paused ? 'paused' : ''),
            el(
              'td',
              {},
              el(
                'button',
                {
                  class: s.paused ? 'resume' : 'pause',
                  type: 'button',
                  disabled: readOnly,
                  title: readOnly ? 'read-only access' : undefined,
                  'aria-label': `${s.paused ? 'Resume' : 'Pause'} schedule ${s.name}`,
                  onclick: () => setSchedulePaused(s.name, !s.paused),
                },
                s.paused ? 'Resume' : 'Pause',
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

// The latest pauses and resumes of queues and schedules, with who and why (operator_actions).
function actionsTable(actions) {
  if (actions.length === 0) return el('p', { class: 'note', id: 'operator-actions-none' }, 'none yet');
  return el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      { id: 'operator-actions' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ['at', 'action', 'of', 'who', 'reason'].map((h) => el('th', { scope: 'col' }, h)),
        ),
      ),
      el(
        'tbody',
        {},
        actions.map((a) =>
          el(
            'tr',
            { 'data-action': a.action, 'data-target': `${a.targetKind}:${a.target}` },
            el('td', {}, time(a.at)),
            el('td', {}, a.action),
            el('td', {}, `${a.targetKind} ${a.target}`),
            el('td', {}, a.actor ?? ''),
            el('td', {}, a.reason ?? ''),
          ),
        ),
      ),
    ),
  );
}

function selectQueue(queue) {
  chart.selected = queue;
  window.dispatchEvent(new Event('leasehold:render'));
}
chart.select = selectQueue;

// Above the table: a name filter that survives the 2 s re-render (it is built once).
function filterControl() {
  const control = field(
    'Filter queues',
    el('input', {
      type: 'search',
      name: 'queue-filter',
      size: 24,
      autocomplete: 'off',
      oninput: (e) => {
        filter = e.target.value.trim();
        window.dispatchEvent(new Event('leasehold:render'));
      },
    }),
  );
  control.classList.add('inline');
  return control;
}

// The queue table's frame, built once: the list keeps its scroll position across the 2 s refresh
// (a fresh box each time jumped back to the top), and only the rows and the count are replaced.
function queueList() {
  const body = el('tbody', {});
  const count = el('p', { class: 'note', id: 'queue-count' });
  const box = el(
    'div',
    // A box of its own height: at fifty queues the chart below stays in view while the list scrolls.
    { class: 'scroll queue-list' },
    el(
      'table',
      { id: 'queues' },
      el(
        'caption',
        { class: 'note' },
        "Gauges every 2 s from lh.stats(); the last hour per minute from the metrics rollup. A trend button charts its queue below; the name opens the queue's page.",
      ),
      el('thead', {}, el('tr', {}, queueHead(true))),
      body,
    ),
  );
  return { body, count, box };
}

export async function overview() {
  const [data, metrics] = await Promise.all([getJson('/api/overview'), hourMetrics()]);
  if (!skeleton) {
    skeleton = {
      filter: filterControl(),
      list: queueList(),
      queues: el('section', { id: 'queues-section', 'aria-labelledby': 'h-queues' }),
      chart: el('section', { id: 'selected-chart', 'aria-labelledby': 'h-chart' }),
      blocked: el('section', { id: 'blocked-section', 'aria-labelledby': 'h-blocked' }),
      schedules: el('section', { id: 'schedules-section', 'aria-labelledby': 'h-schedules' }),
      actions: el('section', { id: 'actions-section', 'aria-labelledby': 'h-actions' }),
    };
    fill(skeleton.queues, skeleton.list.box, skeleton.list.count);
    skeleton.chartBox = el('div', { class: 'chart', id: 'selected-chart-box' });
    skeleton.chartTitle = el('h2', { id: 'h-chart' }, 'Chart');
    fill(skeleton.chart, skeleton.chartTitle, skeleton.chartBox);
    fill(
      main,
      el('h1', { id: 'h-queues' }, 'Queues'),
      skeleton.filter,
      skeleton.queues,
      skeleton.chart,
      skeleton.blocked,
      skeleton.schedules,
      skeleton.actions,
    );
  }
  if (!data.queues.some((q) => q.queue === chart.selected)) chart.selected = data.queues[0]?.queue ?? null;
  const shown = filter ? data.queues.filter((q) => q.queue.includes(filter)) : data.queues;
  const paused = data.queues.filter((q) => q.paused).map((q) => q.queue);
  // A button focused in the list (a keyboard user's place) is focused again in the fresh rows.
  const focused = skeleton.list.body.contains(document.activeElement)
    ? document.activeElement.getAttribute('aria-label')
    : null;
  fill(
    skeleton.list.body,
    shown.map((q) => queueRow(q, metrics.get(q.queue), chart)),
  );
  if (focused) skeleton.list.body.querySelector(`[aria-label="${CSS.escape(focused)}"]`)?.focus();
  skeleton.list.count.textContent = `${shown.length} of ${data.queues.length} queues shown. Paused queues: ${paused.length ? paused.join(', ') : 'none'}.`;
  const series = chart.selected === null ? undefined : metrics.get(chart.selected);
  skeleton.chartTitle.textContent = chart.selected === null ? 'Chart' : `Chart: ${chart.selected}`;
  skeleton.chart.dataset.queue = chart.selected ?? '';
  if (series) selectedChart(skeleton.chartBox, series);
  else fill(skeleton.chartBox, el('p', { class: 'note' }, 'no samples for this queue yet'));
  fill(
    skeleton.blocked,
    el('h2', { id: 'h-blocked' }, 'Blocked ordering keys'),
    blockedTable(data.blockedKeys),
  );
  fill(skeleton.schedules, el('h2', { id: 'h-schedules' }, 'Schedules'), scheduleTable(data.schedules));
  fill(
    skeleton.actions,
    el('h2', { id: 'h-actions' }, 'Recent pauses and resumes'),
    actionsTable(data.operatorActions),
  );
  say(`updated ${time(data.at)}`);
}
