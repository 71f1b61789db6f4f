import { SEARCH_FILTERS, SEARCH_STATUSES } from '../operations/operator/search.js';

/** One control of the dashboard's search form. */
export interface FilterControl {
  name: string;
  label: string;
  /** `text`, `select` (with `options`), or `datetime-local`. */
  control: 'text' | 'select' | 'datetime-local';
  options?: readonly string[];
  hint?: string;
}

// Labels and hints per filter; a filter added to storage/operator/search.ts without one here still gets a
// text control named after it.
const LABELS: Record<string, { label: string; hint?: string }> = {
  id: { label: 'Job id' },
  queue: { label: 'Queue' },
  orderingKey: { label: 'Ordering key' },
  idempotencyKey: { label: 'Idempotency key' },
  errorCode: { label: 'Error code', hint: 'the code a dead or cancelled job ended with' },
  schedule: { label: 'Schedule', hint: 'a cron schedule’s name: the jobs its ticks made' },
  flow: { label: 'Flow id', hint: 'the jobs of one flow (enqueueFlow)' },
  createdFrom: { label: 'Created from' },
  createdTo: { label: 'Created before' },
  finishedFrom: { label: 'Finished from' },
  finishedTo: { label: 'Finished before' },
};

/** The search form, one control per filter, built from the storage filter list. */
export function filterControls(tasks: readonly string[]): FilterControl[] {
  const controls: FilterControl[] = [
    { name: 'status', label: 'Status', control: 'select', options: ['', ...SEARCH_STATUSES] },
  ];
  if (tasks.length > 0)
    controls.push({ name: 'task', label: 'Task', control: 'select', options: ['', ...tasks] });
  for (const filter of SEARCH_FILTERS) {
    const text = LABELS[filter.name] ?? { label: filter.name };
    controls.push({
      name: filter.name,
      label: text.label,
      control: filter.kind === 'time' ? 'datetime-local' : 'text',
      ...(text.hint && { hint: text.hint }),
    });
  }
  controls.push({
    name: 'payload',
    label: 'Payload contains',
    control: 'text',
    hint: 'only for a queue that opted in; its payloads’ first characters are searched',
  });
  return controls;
}
