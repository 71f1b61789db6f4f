// A queue's own page: its gauges (pause and resume), links to its jobs, the ordering keys blocked
// in it, and its four health charts (charts.js), refreshed as the overview is.
import { queueCharts } from './charts.js';
import { el, fill, getJson, main, say, time } from './dom.js';
import { queueHead, queueRow } from './queue-table.js';

let skeleton = null;

export async function queueView(queue) {
  const data = await getJson('/api/overview');
  if (!skeleton) {
    skeleton = {
      gauges: el('section', { id: 'queue-gauges', 'aria-labelledby': 'h-queue' }),
      health: el('section', { id: 'health', 'aria-labelledby': 'h-health' }),
    };
    fill(main, skeleton.gauges, skeleton.health);
  }
  const q = data.queues.find((s) => s.queue === queue);
  const blocked = data.blockedKeys.filter((k) => k.queue === queue).length;
  const query = encodeURIComponent(queue);
  fill(
    skeleton.gauges,
    el('h1', { id: 'h-queue' }, `Queue ${queue}`),
    el(
      'p',
      {},
      el('a', { href: `/search?queue=${query}` }, 'Its jobs'),
      ' · ',
      el('a', { href: `/dead?queue=${query}` }, 'Its dead jobs'),
      ' · ',
      el('a', { href: '/' }, 'All queues'),
    ),
    el(
      'p',
      { class: 'note', id: 'queue-blocked' },
      `${blocked} ordering ${blocked === 1 ? 'key waits' : 'keys wait'} behind a dead job (listed on the overview).`,
    ),
    q
      ? el(
          'div',
          { class: 'scroll' },
          el(
            'table',
            { id: 'queues' },
            el('thead', {}, el('tr', {}, queueHead(false))),
            el('tbody', {}, queueRow(q)),
          ),
        )
      : el('p', { class: 'note', id: 'queue-unknown' }, 'no such queue: it has no jobs and no settings'),
  );
  await queueCharts(skeleton.health, queue);
  say(`updated ${time(data.at)}`);
}
