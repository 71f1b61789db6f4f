// The overview: every queue's gauges (polled every 2 s), pause and resume, blocked ordering keys,
// and the health charts (charts.js) below.
import { healthCharts } from './charts.js';
import { age, el, fill, getJson, main, postJson, readOnly, say, time } from './dom.js';

let skeleton = null;

async function setPaused(queue, paused) {
  const res = await postJson(`/api/queues/${encodeURIComponent(queue)}/${paused ? 'pause' : 'resume'}`);
  say(res.ok ? (paused ? 'paused ' : 'resumed ') + queue : `failed: ${res.body.error}`);
  window.dispatchEvent(new Event('leasehold:render'));
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

export async function overview() {
  const data = await getJson('/api/overview');
  if (!skeleton) {
    skeleton = {
      queues: el('section', { id: 'queues-section', 'aria-labelledby': 'h-queues' }),
      blocked: el('section', { id: 'blocked-section', 'aria-labelledby': 'h-blocked' }),
      health: el('section', { id: 'health', 'aria-labelledby': 'h-health' }),
    };
    fill(main, skeleton.queues, skeleton.blocked, skeleton.health);
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
  await healthCharts(skeleton.health);
  say(`updated ${time(data.at)}`);
}
