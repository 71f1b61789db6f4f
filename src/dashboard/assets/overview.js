// The overview: every queue's gauges (polled every 2 s) with its throttled time, pause and resume,
// blocked ordering keys, cron schedules (pause and resume), the latest operator actions, and the
// health charts (charts.js) below.
import { healthCharts } from './charts.js';
import { age, el, fill, getJson, main, postJson, readOnly, say, time } from './dom.js';

let skeleton = null;

async function setPaused(queue, paused) {
  const res = await postJson(`/api/queues/${encodeURIComponent(queue)}/${paused ? 'pause' : 'resume'}`);
  say(res.ok ? (paused ? 'paused ' : 'resumed ') + queue : `failed: ${res.body.error}`);
  window.dispatchEvent(new Event('leasehold:render'));
}

async function setSchedulePaused(name, paused) {
  const res = await postJson(`/api/schedules/${encodeURIComponent(name)}/${paused ? 'pause' : 'resume'}`);
  say(res.ok ? `${paused ? 'paused' : 'resumed'} schedule ${name}` : `failed: ${res.body.error}`);
  window.dispatchEvent(new Event('leasehold:render'));
}

// A limited queue's throttled time and claims (lh.configureQueue's rateLimit, concurrencyLimit);
// empty for a queue without limits.
function throttled(t) {
  if (!t) return '';
  const now = t.throttledForMs > 0 ? 'now, ' : '';
  return `${now}${(t.throttledMs / 1000).toFixed(1)} s in ${t.throttledClaims} claims`;
}

function queueRow(q) {
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
  return el(
    'tr',
    { 'data-queue': q.queue, class: q.paused ? 'paused' : q.unattended ? 'unattended' : '' },
    el('th', { scope: 'row' }, el('a', { href: `/search?queue=${encodeURIComponent(q.queue)}` }, q.queue)),
    el('td', { class: 'num', 'data-field': 'pending' }, q.pending + (q.capped ? '+' : '')),
    el('td', { class: 'num', 'data-field': 'running' }, q.running),
    el('td', { class: `num${q.dead > 0 ? ' bad' : ''}`, 'data-field': 'dead' }, q.dead),
    el('td', { class: 'num', 'data-field': 'oldest' }, age(q.oldestClaimableAgeMs)),
    el('td', { class: 'num', 'data-field': 'expiring' }, q.leasesExpiringSoon),
    el('td', { class: 'num', 'data-field': 'completed' }, q.completedInWindow),
    el('td', { class: 'num', 'data-field': 'throttled' }, throttled(q.throttle)),
    el(
      'td',
      { 'data-field': 'state', class: q.unattended ? 'bad' : '' },
      q.paused ? 'paused' : q.unattended ? 'no worker: work waits, none running' : '',
    ),
    el('td', {}, toggle),
  );
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

export async function overview() {
  const data = await getJson('/api/overview');
  if (!skeleton) {
    skeleton = {
      queues: el('section', { id: 'queues-section', 'aria-labelledby': 'h-queues' }),
      blocked: el('section', { id: 'blocked-section', 'aria-labelledby': 'h-blocked' }),
      schedules: el('section', { id: 'schedules-section', 'aria-labelledby': 'h-schedules' }),
      actions: el('section', { id: 'actions-section', 'aria-labelledby': 'h-actions' }),
      health: el('section', { id: 'health', 'aria-labelledby': 'h-health' }),
    };
    fill(main, skeleton.queues, skeleton.blocked, skeleton.schedules, skeleton.actions, skeleton.health);
  }
  const paused = data.queues.filter((q) => q.paused).map((q) => q.queue);
  fill(
    skeleton.queues,
    el('h1', { id: 'h-queues' }, 'Queues'),
    el(
      'div',
      { class: 'scroll' },
      el(
        'table',
        { id: 'queues' },
        el('caption', { class: 'note' }, 'Updated every 2 s from lh.stats().'),
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            [
              'queue',
              'pending',
              'running',
              'dead',
              'oldest claimable',
              'leases near expiry',
              'completed / min',
              'throttled',
              'state',
              '',
            ].map((h) => el('th', { scope: 'col' }, h)),
          ),
        ),
        el('tbody', {}, data.queues.map(queueRow)),
      ),
    ),
    el('p', { class: 'note' }, `Paused queues: ${paused.length ? paused.join(', ') : 'none'}.`),
  );
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
  await healthCharts(skeleton.health);
  say(`updated ${time(data.at)}`);
}
