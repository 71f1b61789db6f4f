/** Most distinct error codes one process labels metrics with; later ones share the label `other`. */
export const MAX_ERROR_CODE_LABELS = 100;

/**
 * Keeps label values bounded: error codes are chosen by handlers, so a bug that puts an id into a
 * code must not create a time series per job. The first `MAX_ERROR_CODE_LABELS` codes seen keep
 * their name; the rest are counted as `other`.
 */
export class BoundedLabels {
  readonly #seen = new Set<string>();

  constructor(private readonly max = MAX_ERROR_CODE_LABELS) {}

  /** The label to use for `value`. */
  label(value: string | null | undefined): string {
    const v = value || 'none';
    if (this.#seen.has(v)) return v;
    if (this.#seen.size >= this.max) return 'other';
    this.#seen.add(v);
    return v;
  }
}

/** Attempt numbers as a label: 1 to 10 as themselves, then `11+`, so the label set stays small. */
export function attemptLabel(attempt: number): string {
  return attempt > 10 ? '11+' : String(Math.max(1, Math.trunc(attempt)));
}
