// Enqueue a job from the dashboard: a queue or a task (its schema, when it has one, validates the
// payload on the server; the first issue is shown beside the form).
import { el, field, fill, getJson, main, postJson, readOnly, say } from './dom.js';

export async function enqueueView() {
  const { tasks } = await getJson('/api/filters');
  const queue = el('input', {
    name: 'queue',
    id: 'enqueue-queue',
    list: 'task-names',
    required: true,
    autocomplete: 'off',
  });
  const payload = el(
    'textarea',
    { name: 'payload', id: 'enqueue-payload', rows: '8', cols: '60', spellcheck: 'false' },
    '{}',
  );
  const priority = el('input', { name: 'priority', id: 'enqueue-priority', type: 'number', value: '0' });
  const delay = el('input', { name: 'delayMs', id: 'enqueue-delay', type: 'number', min: '0', value: '0' });
  const out = el('div', { id: 'enqueue-out', 'aria-live': 'polite' });
  const form = el(
    'form',
    {
      id: 'enqueue-form',
      class: 'stack',
      onsubmit: async (event) => {
        event.preventDefault();
        const res = await postJson('/api/enqueue', {
          queue: queue.value.trim(),
          payload: payload.value,
          priority: priority.value,
          delayMs: delay.value,
        });
        if (!res.ok) {
          payload.setAttribute('aria-invalid', 'true');
          fill(out, el('p', { class: 'bad', id: 'enqueue-error', role: 'alert' }, res.body.error));
          return;
        }
        payload.removeAttribute('aria-invalid');
        fill(
          out,
          el(
            'p',
            { id: 'enqueue-done' },
            res.body.created ? 'Enqueued job ' : 'Already enqueued: job ',
            el('a', { href: `/jobs/${res.body.id}` }, res.body.id),
          ),
        );
        say(`enqueued job ${res.body.id}`);
      },
    },
    el(
      'datalist',
      { id: 'task-names' },
      tasks.map((t) => el('option', { value: t.name })),
    ),
    field(
      'Queue or task',
      queue,
      tasks.length
        ? `tasks: ${tasks.map((t) => t.name + (t.hasSchema ? ' (schema)' : '')).join(', ')}`
        : null,
    ),
    field('Payload (JSON)', payload, 'a task with a schema validates it before anything is written'),
    field('Priority', priority),
    field('Delay (ms)', delay),
    el(
      'div',
      { class: 'field actions' },
      el(
        'button',
        {
          type: 'submit',
          id: 'enqueue-submit',
          disabled: readOnly,
          title: readOnly ? 'read-only access' : undefined,
        },
        'Enqueue',
      ),
    ),
    out,
  );
  fill(main, el('h1', {}, 'Enqueue a job'), form);
}
