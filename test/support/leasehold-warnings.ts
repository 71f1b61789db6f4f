// A Vitest setup file (vitest.config.ts). What the library says when nobody listens (a lost lease,
// an unreachable database: `LeaseholdWarning` process warnings) is what many tests provoke on
// purpose. Here those warnings are kept, not printed, so that the run's output carries no stray
// `LEASEHOLD_…` line that a reader would take for a problem, and a test asserts on what it
// provoked with `leaseholdWarnings()`. Every other warning is printed as Node prints it.

interface Capture {
  warnings: Error[];
}

const KEY = Symbol.for('leasehold.test.warnings');
const store = globalThis as { [KEY]?: Capture };

function install(): Capture {
  const existing = store[KEY];
  if (existing) return existing;
  const capture: Capture = { warnings: [] };
  store[KEY] = capture;
  // Node prints warnings from a 'warning' listener of its own (onWarning); it is swapped for one
  // that keeps Leasehold's. Other listeners (a test's own process.on('warning')) still hear them.
  for (const printer of process.listeners('warning')) {
    if (printer.name !== 'onWarning') continue;
    process.off('warning', printer);
    process.on('warning', (warning: Error) => {
      if (warning.name === 'LeaseholdWarning') capture.warnings.push(warning);
      else printer(warning);
    });
  }
  return capture;
}

install();

/** The `LeaseholdWarning`s this test file's process emitted so far (with `code`: only those). */
export function leaseholdWarnings(code?: string): string[] {
  return install()
    .warnings.filter((warning) => code === undefined || (warning as { code?: string }).code === code)
    .map((warning) => warning.message);
}
