/**
 * What `expectEnqueued` compares a payload with: a partial payload (every key given must match,
 * recursively; keys not given are ignored; arrays match element by element, same length), or a
 * predicate.
 */
export type PayloadMatch<P> = PartialPayload<P> | ((payload: P) => boolean);

/** A payload with every object key optional, at any depth. */
export type PartialPayload<P> = P extends readonly (infer E)[]
  ? readonly PartialPayload<E>[]
  : P extends Date
    ? P
    : P extends object
      ? { [K in keyof P]?: PartialPayload<P[K]> }
      : P;

/** True when `actual` (a stored JSON payload) matches `expected` (see `PayloadMatch`). */
export function matchesPayload(actual: unknown, expected: unknown): boolean {
  if (typeof expected === 'function') return Boolean((expected as (payload: unknown) => unknown)(actual));
  return matchesPartial(actual, expected);
}

function matchesPartial(actual: unknown, expected: unknown): boolean {
  // A Date was stored as its JSON text.
  if (expected instanceof Date) return actual === expected.toJSON();
  if (Array.isArray(expected)) {
    return (
      Array.isArray(actual) &&
      actual.length === expected.length &&
      expected.every((item, i) => matchesPartial(actual[i], item))
    );
  }
  if (isObject(expected)) {
    if (!isObject(actual) || Array.isArray(actual)) return false;
    return Object.entries(expected).every(([key, value]) =>
      // JSON has no undefined: `{ key: undefined }` asks for the key to be absent.
      value === undefined ? !(key in actual) : key in actual && matchesPartial(actual[key], value),
    );
  }
  return Object.is(actual, expected);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** JSON text of a value, cut to `max` characters, for a failure message. */
export function preview(value: unknown, max = 200): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
