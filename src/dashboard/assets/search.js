// Search over every job (one control per filter, from /api/filters), paged by cursor, with bulk
// actions on whatever the filter matches (bulk.js); and the dead-job list.
import { bulkPanel } from './bulk.js';
import { at, el, field, fill, getJson, main, time } from './dom.js';

// datetime-local values are local times without a zone: sent as ISO (UTC) to the server.
function toQuery(form) {
  const params = new URLSearchParams();
  for (const [name, value] of new FormData(form)) {
    if (typeof value !== 'string' || value.trim() === '') continue;
    const control = form.elements[name];
    params.set(
      name,
      control && control.type === 'datetime-local' ? new Date(value).toISOString() : value.trim(),
    );
  }
  return params;
}

function control(c, params) {
  const value = params.get(c.name) || '';
  if (c.control === 'select') {
    return el(
      'select',
      { name: c.name, id: `f-${c.name}` },
      c.options.map((o) => el('option', { value: o, selected: o === value }, o === '' ? 'any' : o)),
    );
  }
  // A time in the query is ISO (UTC); the control shows it in local time, to the minute.
  let shown = value;
  if (c.control === 'datetime-local' && value) {
    const d = new Date(value);
    shown = new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  }
  return el('input', { name: c.name, id: `f-${c.name}`, type: c.control, value: shown, autocomplete: 'off' });
}

function resultTable(jobs) {
  return el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      { id: 'results' },
      el('caption', { class: 'note' }, 'Newest first'),
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ['id', 'queue', 'status', 'attempts', 'error', 'ordering key', 'created', 'finished'].map((h) =>
            el('th', { scope: 'col' }, h),
          ),
        ),
      ),
      el(
        'tbody',
        {},
        jobs.map((j) =>
          el(
            'tr',
            { 'data-job': j.id, 'data-status': j.status },
            el('td', {}, el('a', { href: `/jobs/${j.id}` }, j.id)),
            el('td', {}, j.queueName),
            el('td', { class: `status-${j.status}` }, j.status),
            el('td', { class: 'num' }, `${j.attemptCount}/${j.maxAttempts}`),
            el('td', {}, j.errorCode || ''),
            el('td', {}, j.orderingKey || ''),
            el('td', {}, time(j.createdAt)),
            el('td', {}, j.finishedAt ? time(j.finishedAt) : ''),
          ),
        ),
      ),
    ),
  );
}

export async function searchView() {
  const params = new URLSearchParams(location.search);
  const { controls } = await getJson('/api/filters');
  const form = el(
    'form',
    {
      class: 'filters',
      id: 'search-form',
      method: 'get',
      action: '/search',
      role: 'search',
      onsubmit: (event) => {
        event.preventDefault();
        location.assign(at(`/search?${toQuery(form).toString()}`));
      },
    },
    controls.map((c) => field(c.label, control(c, params), c.hint)),
    el(
      'div',
      { class: 'field actions' },
      el('button', { type: 'submit' }, 'Search'),
      el('a', { href: '/search' }, 'Clear'),
    ),
  );
  const filterParams = new URLSearchParams(params);
  filterParams.delete('cursor');
  let results;
  try {
    const page = await getJson(`/api/search?${params.toString()}`);
    results = [
      page.jobs.length ? resultTable(page.jobs) : el('p', { id: 'no-results' }, 'No jobs match.'),
      page.cursor
        ? el(
            'p',
            {},
            el(
              'a',
              {
                id: 'next-page',
                href:
                  '/search?' +
                  new URLSearchParams({ ...Object.fromEntries(filterParams), cursor: page.cursor }),
              },
              'Next page',
            ),
          )
        : null,
    ];
  } catch (err) {
    results = [el('p', { class: 'bad', id: 'search-error', role: 'alert' }, err.message)];
  }
  fill(
    main,
    el('h1', {}, 'Search'),
    form,
    [...filterParams.keys()].length ? bulkPanel(Object.fromEntries(filterParams)) : null,
    el('h2', {}, 'Jobs'),
    ...results,
  );
}

// The dead-job list of before the search page (kept: links and habits point here).
function attempts(count, max, budget) {
  if (budget === null || budget === undefined) return `${count}/${max}`;
  if (count < budget) return `${count}/${budget} (permanent error)`;
  if (budget >= max) return `${count}/${max}`;
  return `${count}/${budget} (budget for this error; max ${max})`;
}
const BUDGET_NOTE =
  'A budget below max: unclassified errors (neither RetryableError nor PermanentError) get the ' +
  "queue's unknownErrorAttempts (default 3), and a queue's maxAttempts caps every job's.";

export async function deadList() {
  const { reasonField, act } = await import('./job.js');
  const params = new URLSearchParams(location.search);
  const data = await getJson(`/api/dead?${params.toString()}`);
  const form = el(
    'form',
    { class: 'filters', method: 'get', action: '/dead' },
    field('Queue', el('input', { name: 'queue', value: params.get('queue') || '' })),
    field('Error code', el('input', { name: 'errorCode', value: params.get('errorCode') || '' })),
    el('div', { class: 'field actions' }, el('button', { type: 'submit' }, 'Filter')),
  );
  const rows = data.jobs.map((job) =>
    el(
      'tr',
      { 'data-job': job.id },
      el('td', {}, el('a', { href: `/jobs/${job.id}` }, job.id)),
      el('td', {}, job.queueName),
      el('td', {}, job.errorCode || ''),
      el('td', {}, (job.errorMessage || '').slice(0, 120)),
      el(
        'td',
        { class: 'num', 'data-field': 'attempts' },
        attempts(job.attemptCount, job.maxAttempts, job.attemptBudget),
      ),
      el('td', {}, time(job.diedAt)),
      el(
        'td',
        {},
        el(
          'button',
          {
            class: 'replay',
            type: 'button',
            onclick: async () => {
              if (await act(job.id, 'replay')) deadList();
            },
          },
          'Replay',
        ),
      ),
    ),
  );
  const smaller = data.jobs.some((job) => job.attemptBudget !== null && job.attemptBudget < job.maxAttempts);
  const search = new URLSearchParams({ status: 'dead' });
  for (const name of ['queue', 'errorCode']) if (params.get(name)) search.set(name, params.get(name));
  fill(
    main,
    el('h1', {}, 'Dead jobs'),
    form,
    el('p', {}, reasonField()),
    el(
      'p',
      { class: 'note' },
      el('a', { href: `/search?${search}` }, 'Replay, cancel or remove all of them by filter'),
    ),
    rows.length
      ? el(
          'div',
          { class: 'scroll' },
          el(
            'table',
            { id: 'dead' },
            el(
              'thead',
              {},
              el(
                'tr',
                {},
                ['id', 'queue', 'error code', 'message', 'attempts', 'died', ''].map((h) =>
                  el('th', { scope: 'col' }, h),
                ),
              ),
            ),
            el('tbody', {}, rows),
          ),
        )
      : el('p', { id: 'no-dead' }, 'No dead jobs match.'),
    smaller ? el('p', { class: 'note', id: 'budget-note' }, BUDGET_NOTE) : null,
    data.cursor
      ? el(
          'p',
          {},
          el(
            'a',
            {
              id: 'next-page',
              href: `/dead?${new URLSearchParams({ ...Object.fromEntries(params), cursor: data.cursor })}`,
            },
            'Next page',
          ),
        )
      : null,
  );
}
