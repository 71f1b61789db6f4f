// The bounded integer flags every chaos command takes (npm run chaos, chaos:failover, chaos:hosts):
// each flag has a default, a smallest and a largest value, so a typo cannot start a run that never
// ends. A table of flag name -> [default, smallest, largest] drives parsing and usage alike.

/** parseArgs option entries for the flags of `table`: each takes a string, checked below. */
export function integerFlagOptions(table) {
  return Object.fromEntries(Object.keys(table).map((name) => [name, { type: 'string' }]));
}

/** The usage lines of the flags of `table`, the names padded to `width`. */
export function integerFlagUsage(table, width) {
  return Object.entries(table)
    .map(([name, [fallback, min, max]]) => `  --${name.padEnd(width)}default ${fallback} (${min}..${max})`)
    .join('\n');
}

/**
 * Reads the flags of `table` from parseArgs' `values` into `options`, camelCased (`lease-ms` ->
 * `leaseMs`); returns the first flag's error message, or null when every one is in its bounds.
 */
export function readIntegerFlags(table, values, options) {
  for (const [name, [fallback, min, max]] of Object.entries(table)) {
    const text = values[name];
    const value = text === undefined ? fallback : Number(text);
    if (!Number.isInteger(value) || value < min || value > max) {
      return `--${name} must be an integer from ${min} to ${max}`;
    }
    options[name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = value;
  }
  return null;
}
