import { ValidationError } from './errors.js';

/**
 * The one unknown-option check of the public API: every options object (client, enqueue, claim,
 * fail, worker, queue, operator calls) goes through it, so a typo such as `conectionString` or
 * `priorty` fails at once with a `ValidationError` naming the option and the likely one meant,
 * instead of being ignored and silently falling back to a default.
 */
export function rejectUnknownOptions(object: object, known: readonly string[], field: string): void {
  for (const key of Object.keys(object)) {
    if (known.includes(key)) continue;
    const suggestion = closestOption(key, known);
    throw new ValidationError(
      `${field}.${key}`,
      `is not an option${suggestion ? ` (did you mean ${suggestion}?)` : ''}; known: ${known.join(', ')}`,
    );
  }
}

/**
 * The known option nearest to `given` by edit distance (case-insensitive), when it is near enough to
 * be a typo: at most one edit for names up to four characters, two up to eight, three beyond.
 */
export function closestOption(given: string, known: readonly string[]): string | undefined {
  const name = given.toLowerCase();
  const allowed = name.length <= 4 ? 1 : name.length <= 8 ? 2 : 3;
  let best: string | undefined;
  let bestDistance = allowed + 1;
  for (const candidate of known) {
    const distance = editDistance(name, candidate.toLowerCase(), bestDistance);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

// Levenshtein distance (insertions, deletions, substitutions), giving up at `cap`: option names are
// short, so two rows of the table suffice.
function editDistance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) >= cap) return cap;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const value = Math.min(
        (previous[j] as number) + 1,
        (current[j - 1] as number) + 1,
        (previous[j - 1] as number) + cost,
      );
      current.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin >= cap) return cap;
    previous = current;
  }
  return Math.min(previous[b.length] as number, cap);
}
