/** Writes one diagnostic line to stderr; stdout is kept for a command's results (`--json`). */
export function note(message: string): void {
  process.stderr.write(`leasehold: ${message}\n`);
}
