// Time bounds. Every measured run is raced against a timeout so the bench always terminates with a
// clear message, and every loop also checks a deadline so it stops by itself.

/** Thrown when a workload does not finish in time. */
export class BenchTimeoutError extends Error {
  constructor(what, ms) {
    super(
      `${what} did not finish within ${Math.round(ms / 1000)} s (raise --timeout-s if the machine is slow)`,
    );
    this.name = 'BenchTimeoutError';
  }
}

/** Resolves with `promise`, or rejects with BenchTimeoutError after `ms`. */
export async function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new BenchTimeoutError(what, ms)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A deadline `ms` from now; `check()` throws once it has passed. */
export function deadline(ms, what) {
  const end = performance.now() + ms;
  return {
    get passed() {
      return performance.now() >= end;
    },
    check() {
      if (performance.now() >= end) throw new BenchTimeoutError(what, ms);
    },
  };
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
