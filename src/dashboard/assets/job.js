// One job: its facts (with the schedule that made it), actions, payload, result and progress (on
// request), its flow drawn as a graph, and its whole history as a timeline: claims (the attempts its
// events end), heartbeats counted, expiries, refusals, retries with their delay, operator actions,
// and its effects ledger entries with their state.
import { age, el, fill, getJson, postJson, readOnly, say, time } from './dom.js';
import { flowSection } from './flow.js';

function attempts(count, max, budget) {
  if (budget === null || budget === undefined) return `${count}/${max}`;
  if (count < budget) return `${count}/${budget} (permanent error)`;
  if (budget >= max) return `${count}/${max}`;
  return `${count}/${budget} (budget for this error; max ${max})`;
}

function deathBudget(history) {
  const death = history.filter((e) => e.kind === 'dead').pop();
  const budget = death?.detail ? death.detail.attemptBudget : null;
  return typeof budget === 'number' ? budget : null;
}

// What the history's detail column says of an event. A replay carries the error the job died
// with: it is shown as that, not as an error of the replay.
function eventDetail(e) {
  const parts = [];
  if (e.kind === 'replayed') {
    if (e.errorCode) parts.push(`had died with ${e.errorCode}`);
  } else {
    // A durable step: its numbered name, a sleep's wake time (never its result: user data).
    if (e.kind === 'step' && e.detail) {
      parts.push(
        e.detail.kind === 'sleep'
          ? `sleep ${e.detail.step} until ${e.detail.wakeAt}`
          : e.detail.kind === 'wait'
            ? `wait ${e.detail.step} for its event until ${e.detail.timeoutAt}`
            : `step ${e.detail.step} recorded`,
      );
    }
    if (e.errorCode) parts.push(e.errorClass ? `${e.errorCode} (${e.errorClass})` : e.errorCode);
    if (e.message && e.kind !== 'cancelled') parts.push(e.message);
  }
  if (e.delayMs !== null && e.delayMs !== undefined) parts.push(`again in ${age(e.delayMs)}`);
  if (e.leaseExtensions) parts.push(`${e.leaseExtensions} lease extension(s)`);
  if (e.operation) parts.push(`${e.operation} refused`);
  if (e.kind === 'dead' && e.detail && typeof e.detail.attemptBudget === 'number')
    parts.push(`attempt budget ${e.detail.attemptBudget}`);
  if (e.reason) parts.push(`reason: ${e.reason}`);
  return parts.join('; ');
}

// The reason an operator types for replays and cancels (recorded in the history). One input for
// the page's life: the job view re-renders every 2 s, and a fresh input each time took the focus
// from under the operator's typing, and lost the keystrokes that reached the old, detached one.
let reasonInput = null;

export function reasonField() {
  reasonInput ??= el('input', {
    id: 'reason',
    size: '40',
    maxlength: '1000',
    disabled: readOnly,
    placeholder: 'reason for replay or cancel (recorded in the history)',
  });
  const input = reasonInput;
  if (document.activeElement === input) {
    // Moving the focused input into the new tree blurs it: give focus and caret back once the
    // render that called this has put the tree in place (it does so before yielding).
    const { selectionStart, selectionEnd } = input;
    queueMicrotask(() => {
      if (!input.isConnected) return;
      input.focus();
      input.setSelectionRange(selectionStart, selectionEnd);
    });
  }
  return el(
    'span',
    { class: 'field inline' },
    el('label', { for: 'reason', class: 'visually-hidden' }, 'Reason'),
    input,
  );
}

export async function act(id, action) {
  const fallback = action === 'cancel' ? 'cancelled from the dashboard' : 'replayed from the dashboard';
  const typed = reasonInput ? reasonInput.value.trim() : '';
  const res = await postJson(`/api/jobs/${id}/${action}`, { reason: typed || fallback });
  say(res.ok ? `${action} job ${id}: done` : `${action} failed: ${res.body.error}`);
  return res.ok;
}

// The payload stays hidden until asked for (as with the CLI's --payload): it may hold personal data.
let showPayload = false;

function timeline(job) {
  const rows = job.history.map((e) => ({
    at: e.at,
    kind: e.kind,
    row: el(
      'tr',
      { 'data-kind': e.kind },
      el('td', {}, time(e.at)),
      el('td', {}, e.kind),
      el('td', {}, e.statusAfter || ''),
      el('td', {}, e.attempt ?? ''),
      el('td', {}, e.owner || e.actor || ''),
      el('td', {}, eventDetail(e)),
    ),
  }));
  for (const f of job.effects || []) {
    rows.push({
      at: f.intentAt,
      kind: 'effect',
      row: el(
        'tr',
        { 'data-kind': 'effect', 'data-effect-state': f.state },
        el('td', {}, time(f.intentAt)),
        el('td', {}, 'effect'),
        el('td', {}, ''),
        el('td', {}, f.attempt),
        el('td', {}, ''),
        el(
          'td',
          {},
          f.name +
            ' (' +
            f.key +
            '): ' +
            (f.state === 'done'
              ? `result recorded ${time(f.resultAt)}`
              : 'intent without a result: outcome uncertain'),
        ),
      ),
    });
  }
  // In time order; events of the same instant keep their recorded order.
  rows.sort((a, b) => new Date(a.at) - new Date(b.at));
  return el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      { id: 'history', class: 'timeline' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ['at', 'event', 'status after', 'attempt', 'who', 'detail'].map((h) =>
            el('th', { scope: 'col' }, h),
          ),
        ),
      ),
      el(
        'tbody',
        {},
        rows.map((r) => r.row),
      ),
    ),
  );
}

// The payload, the result and the progress detail: user data, shown only on request.
function shown(title, id, p) {
  return p ? [el('h2', {}, title + (p.truncated ? ' (truncated)' : '')), el('pre', { id }, p.text)] : [];
}

export async function jobView(id) {
  const { job, flow } = await getJson(`/api/jobs/${id}${showPayload ? '?payload=1' : ''}`);
  if (!job) {
    fill(document.getElementById('main'), el('h1', {}, `No job ${id}`));
    return;
  }
  const lastError = [job.lastErrorCode, job.lastErrorClass && `(${job.lastErrorClass})`, job.lastErrorMessage]
    .filter(Boolean)
    .join(' ');
  const budget = job.status === 'dead' ? deathBudget(job.history) : null;
  const facts = [
    ['status', job.status],
    ['queue', job.queueName],
    ['attempts', attempts(job.attemptCount, job.maxAttempts, budget)],
    ['priority', job.priority],
    ['available at', time(job.availableAt)],
    ['lease owner', job.leaseOwner],
    ['lease expires', job.leaseExpiresAt && time(job.leaseExpiresAt)],
    ['last error', lastError || null],
    ['created', time(job.createdAt)],
    ['finished', job.finishedAt && time(job.finishedAt)],
    [
      'scheduled by',
      job.schedule
        ? el(
            'span',
            {},
            el('a', { href: `/search?schedule=${encodeURIComponent(job.schedule.name)}` }, job.schedule.name),
            ` (tick ${time(job.schedule.tickAt)})`,
          )
        : null,
    ],
  ];
  const actions = [];
  const rerender = () => window.dispatchEvent(new Event('leasehold:render'));
  if (job.status === 'dead')
    actions.push(
      el(
        'button',
        {
          class: 'replay',
          type: 'button',
          disabled: readOnly,
          onclick: async () => {
            if (await act(job.id, 'replay')) rerender();
          },
        },
        'Replay',
      ),
    );
  // Cancel applies to work not yet finished (a dead job is finished: replay it or leave it).
  if (job.status === 'pending' || job.status === 'running')
    actions.push(
      el(
        'button',
        {
          class: 'cancel',
          type: 'button',
          disabled: readOnly,
          onclick: async () => {
            if (await act(job.id, 'cancel')) rerender();
          },
        },
        'Cancel',
      ),
    );
  if (actions.length) actions.push(reasonField());
  const payload = job.payloadPreview
    ? [
        ...shown('Payload', 'payload', job.payloadPreview),
        ...shown('Progress', 'progress', job.progressPreview),
        ...shown('Result', 'result', job.resultPreview),
      ]
    : [
        el('h2', {}, 'Payload'),
        el(
          'p',
          {},
          el(
            'button',
            {
              id: 'show-payload',
              type: 'button',
              onclick: () => {
                showPayload = true;
                rerender();
              },
            },
            'Show payload and result',
          ),
          el('span', { class: 'note' }, ' hidden by default: they may hold personal data'),
        ),
      ];
  const stack = job.lastErrorStack
    ? [
        el(
          'details',
          { id: 'stack' },
          el('summary', {}, 'Stack trace of the last error'),
          el('pre', {}, job.lastErrorStack),
        ),
      ]
    : [];
  const heartbeats = job.history.reduce((n, e) => n + (e.leaseExtensions || 0), 0);
  fill(
    document.getElementById('main'),
    el('h1', {}, `Job ${job.id}`),
    el(
      'table',
      { id: 'job' },
      el(
        'tbody',
        {},
        facts.map(([k, v]) =>
          el('tr', {}, el('th', { scope: 'row' }, k), el('td', { 'data-field': k }, v ?? '-')),
        ),
      ),
    ),
    ...stack,
    el('p', {}, actions),
    ...payload,
    ...flowSection(flow, job.id),
    el('h2', {}, 'Timeline'),
    el(
      'p',
      { class: 'note', id: 'timeline-summary' },
      job.history.filter((e) => e.attempt).length +
        ' recorded attempt(s), ' +
        heartbeats +
        ' heartbeat(s) counted, ' +
        (job.effects || []).length +
        ' effect(s).',
    ),
    timeline(job),
  );
}
