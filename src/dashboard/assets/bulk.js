// Bulk actions on every job a search filter matches: preview the count, confirm it by name, then
// follow the server's batches on a progress bar (the bulk action log, GET /api/bulk/:id).
import { el, field, fill, getJson, postJson, readOnly, say } from './dom.js';

const VERB = { replay: 'Replay', cancel: 'Cancel', remove: 'Remove' };
const APPLIES = {
  replay: 'dead jobs',
  cancel: 'pending, blocked and running jobs',
  remove: 'dead, cancelled and succeeded jobs',
};

async function follow(id, matched, bar, text) {
  for (;;) {
    const action = await getJson(`/api/bulk/${id}`);
    bar.max = Math.max(1, matched);
    bar.value = action.done;
    text.textContent = `${action.done} of ${matched} ${action.state === 'running' ? '…' : action.state}`;
    if (action.state !== 'running') return action;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

/** The bulk panel for a filter (a plain object of the search's criteria). */
export function bulkPanel(filter) {
  const action = el(
    'select',
    { name: 'bulk-action', id: 'bulk-action' },
    Object.entries(VERB).map(([value, label]) => el('option', { value }, label)),
  );
  const reason = el('input', {
    id: 'bulk-reason',
    name: 'bulk-reason',
    maxlength: '1000',
    size: '40',
    placeholder: 'recorded in every job’s history',
  });
  const out = el('div', { id: 'bulk-out', 'aria-live': 'polite' });
  const preview = el(
    'button',
    {
      type: 'button',
      id: 'bulk-preview',
      disabled: readOnly,
      title: readOnly ? 'read-only access' : undefined,
      onclick: async () => {
        const kind = action.value;
        const res = await postJson('/api/bulk/preview', { action: kind, filter });
        if (!res.ok) {
          fill(out, el('p', { class: 'bad', role: 'alert' }, res.body.error));
          return;
        }
        const n = res.body.matched;
        const confirmButton = el(
          'button',
          {
            type: 'button',
            id: 'bulk-confirm',
            class: 'danger',
            disabled: n === 0,
            onclick: async () => {
              confirmButton.disabled = true;
              const started = await postJson('/api/bulk', {
                action: kind,
                filter,
                expectedCount: n,
                reason: reason.value,
              });
              if (!started.ok) {
                fill(out, el('p', { class: 'bad', role: 'alert' }, started.body.error));
                return;
              }
              const bar = el('progress', {
                id: 'bulk-progress',
                max: String(Math.max(1, n)),
                value: '0',
                'aria-label': 'Bulk action progress',
              });
              const text = el('span', { id: 'bulk-progress-text' });
              fill(out, el('p', {}, bar, ' ', text));
              const done = await follow(started.body.id, started.body.matched, bar, text);
              out.append(
                el(
                  'p',
                  { id: 'bulk-done', 'data-done': String(done.done), 'data-state': done.state },
                  VERB[kind] +
                    ': ' +
                    done.done +
                    ' jobs, ' +
                    done.state +
                    (done.error ? ` (${done.error})` : '') +
                    '.',
                ),
              );
              say(`${VERB[kind].toLowerCase()} by filter: ${done.done} jobs`);
            },
          },
          `${VERB[kind]} ${n} jobs`,
        );
        fill(
          out,
          el(
            'div',
            { class: 'confirm', role: 'group', 'aria-labelledby': 'bulk-count' },
            el(
              'p',
              { id: 'bulk-count', 'data-count': String(n) },
              n +
                (res.body.capped ? '+' : '') +
                ' ' +
                APPLIES[kind] +
                ' match this filter now. ' +
                (n
                  ? `${VERB[kind]} all ${n}? Each job’s history records you and the reason.`
                  : 'Nothing to do.'),
            ),
            confirmButton,
            el('button', { type: 'button', id: 'bulk-dismiss', onclick: () => fill(out) }, 'Do nothing'),
          ),
        );
        confirmButton.focus();
      },
    },
    'Preview',
  );
  return el(
    'section',
    { class: 'bulk', id: 'bulk', 'aria-labelledby': 'h-bulk' },
    el('h2', { id: 'h-bulk' }, 'Act on every match'),
    el(
      'div',
      { class: 'filters' },
      field('Action', action),
      field('Reason', reason),
      el('div', { class: 'field actions' }, preview),
    ),
    out,
  );
}
