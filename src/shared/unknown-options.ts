import { ValidationError } from './errors.js';

/**
 * The one unknown-option check of the public API: every options object (client, enqueue, claim,
 * fail, worker, queue, operator calls) goes through it, so a typo such as `conectionString` or
 * `priorty` fails at once with a `ValidationError` naming the option and the likely one meant,
 * instead of being ignored and silently falling back to a default.
 */
export function rejectUnknownOptions(
  object: object,
  known: readonly string[],
  field: string,
  nested?: { readonly known: readonly string[]; readonly path: string },
): void {
  for (const key of Object.keys(object)) {
    if (known.includes(key)) continue;
    // An option of the level below given one level up (`lh.worker({ concurrency })`, which is set
    // per queue) is pointed to where it belongs.
    const below = nested === undefined ? undefined : closestOption(key, nested.known);
    const suggestion =
      closestOption(key, known) ?? (below === undefined ? undefined : `${nested?.path}.${below}`);
    throw new ValidationError(
      `${field}.${key}`,
      `is not an option${suggestion ? ` (did you mean ${suggestion}?)` : ''}; known: ${known.join(', ')}`,
    );
  }
}

/**
 * The known option nearest to `given` by edit distance (case-insensitive), when it is near enough to
 * be a typo (see `closestNames`).
 */
export function closestOption(given: string, known: readonly string[]): string | undefined {
  return closestNames(given, known, 1)[0];
}

/**
 * The one "did you mean" of Leasehold (options, queue names): up to `max` of `known` nearest to
 * `given` by edit distance (case-insensitive), nearest first, when near enough to be a typo: at most
 * one edit (a swap of neighbours counts as one) for names up to four characters, two up to eight,
 * three beyond.
 */
export function closestNames(given: string, known: readonly string[], max: number): string[] {
  const name = given.toLowerCase();
  const allowed = name.length <= 4 ? 1 : name.length <= 8 ? 2 : 3;
  const near: { candidate: string; distance: number }[] = [];
  for (const candidate of known) {
    const lower = candidate.toLowerCase();
    let distance = editDistance(name, lower, allowed + 1);
    // A misspelt start of a longer name (`concurency` for `concurrencyLimit`) counts one edit more
    // than its distance to that start; short names are left out, as they start too many names.
    if (name.length >= 6 && lower.length > name.length + 1) {
      for (const end of [name.length, name.length + 1]) {
        distance = Math.min(distance, editDistance(name, lower.slice(0, end), allowed + 1) + 1);
      }
    }
    if (distance <= allowed) near.push({ candidate, distance });
  }
  near.sort((a, b) => a.distance - b.distance || (a.candidate < b.candidate ? -1 : 1));
  return near.slice(0, max).map((entry) => entry.candidate);
}

// Edit distance counting insertions, deletions, substitutions and swaps of neighbours (optimal
// string alignment), giving up at `cap`: option names are short, so a full table is cheap.
function editDistance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) >= cap) return cap;
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    const row = d[i] as number[];
    const above = d[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(
        (above[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (above[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
      row[j] = value;
    }
  }
  return Math.min((d[a.length] as number[])[b.length] as number, cap);
}
