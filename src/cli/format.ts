import { formatMs } from '../operations/schema/health.js';

/** Formats rows as a plain-text table with a header, columns padded to their widest cell. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((header, i) =>
    Math.max(header.length, ...rows.map((row) => (row[i] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** A duration for people (850ms, 12s, 4m 10s, 3h 5m, 2d 4h), as health messages print one. */
export function formatDuration(ms: number | null): string {
  return ms === null ? '-' : formatMs(ms);
}

/** A time as ISO 8601 (UTC), to the millisecond. */
export function formatTime(date: Date | null): string {
  return date === null ? '-' : date.toISOString();
}

/** Shortens free text to one line of at most `max` characters. */
export function oneLine(text: string | null, max: number): string {
  if (text === null) return '';
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

/**
 * Attempts as an operator reads them: `3/8`; when the job died under a smaller budget than its
 * maximum, that budget: `3/3 (budget for this error; max 8)`; and when it died before spending
 * its budget, why: `1/8 (permanent error)`. `budget` null: none recorded.
 */
export function formatAttempts(count: number, max: number, budget: number | null): string {
  if (budget === null) return `${count}/${max}`;
  if (count < budget) return `${count}/${budget} (permanent error)`;
  if (budget >= max) return `${count}/${max}`;
  return `${count}/${budget} (budget for this error; max ${max})`;
}

/** The attempt budget a job's latest `dead` event recorded, or null. */
export function deathBudget(history: readonly { kind: string; detail: unknown }[]): number | null {
  const death = history.findLast((event) => event.kind === 'dead');
  const budget = (death?.detail as { attemptBudget?: unknown } | null)?.attemptBudget;
  return typeof budget === 'number' ? budget : null;
}

/** The note under a list that shows a smaller budget: what it means and where it comes from. */
export const BUDGET_NOTE =
  'a budget below max: unclassified errors (neither RetryableError nor PermanentError) get the ' +
  "queue's unknownErrorAttempts (default 3), and a queue's maxAttempts caps every job's";
