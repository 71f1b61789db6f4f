/** How long the deadline watch sleeps at most before reading the deadline again. */
const DEADLINE_WATCH_MAX_MS = 60_000;

/**
 * `write`, or `expired()` once the lease's deadline (monotonic, `performance.now()`) has passed
 * without an answer. A durable tool's statements (the effects ledger, the steps) wait no longer
 * than the lease: on a link that answers nothing (a primary cut off) a statement would otherwise
 * hold the handler until the client's statement timeout while the job, its lease lapsed, runs
 * elsewhere. The statement is left to land or not: it is fenced, so a late one is refused. The
 * deadline is read again when the timer fires (a renewal moves it).
 */
export function beforeDeadline<T>(
  host: { readonly deadline: number },
  write: Promise<T>,
  expired: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const lapsed = new Promise<never>((_, reject) => {
    const check = () => {
      const left = host.deadline - performance.now();
      if (left > 0) timer = setTimeout(check, Math.min(left, DEADLINE_WATCH_MAX_MS));
      else reject(expired());
    };
    check();
  });
  write.catch(() => {}); // answered after the deadline: nobody waits for it any more
  return Promise.race([write, lapsed]).finally(() => clearTimeout(timer));
}
