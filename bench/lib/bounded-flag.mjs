// A whole-number flag of a standalone bench command, checked against its range: out of range, the
// command says which flag and range and exits 2 (bad usage), before it starts a server.

/** `text` as an integer from `min` to `max`, or exit 2 naming `--name` and `command`. */
export function boundedFlag(command, text, name, min, max) {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`${command}: --${name} must be an integer from ${min} to ${max}`);
    process.exit(2);
  }
  return n;
}
