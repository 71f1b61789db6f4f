// The nemesis: one scheduled round of every enabled fault (so each surely happens), then faults
// drawn at random (seeded) until production is over, with a random gap between faults. Faults run
// one at a time, except the pinned transaction, which is held in the background while the others go on.
import {
  blockEventLoop,
  concurrentSweeps,
  exhaustConnections,
  FAULT_KINDS,
  killWorker,
  pauseWorker,
  pinXmin,
  RANDOM_KINDS,
  restartPostgres,
  terminateBackends,
} from './faults.mjs';

const INJECT = {
  kill: killWorker,
  pause: (ctx) => pauseWorker(ctx),
  'short-pause': (ctx) => pauseWorker(ctx, { short: true }),
  restart: restartPostgres,
  block: blockEventLoop,
  terminate: terminateBackends,
  sweeps: concurrentSweeps,
  exhaustion: exhaustConnections,
};

/** Runs the schedule; resolves with every fault's record (and the errors of faults that failed). */
export async function runNemesis(ctx, { kinds, productionDone, shouldStop }) {
  const records = [];
  const errors = [];
  const gap = () => sleep(ctx.config.gapMs * (0.5 + ctx.rng()));
  const inject = async (kind) => {
    ctx.log(`fault: ${kind}`);
    try {
      const record = await INJECT[kind](ctx);
      records.push(record);
      ctx.log(`fault: ${kind} on ${record.target} healed`);
    } catch (err) {
      errors.push(`${kind}: ${err?.message ?? err}`);
      ctx.log(`fault: ${kind} could not be injected: ${err?.message ?? err}`);
    }
  };

  for (const kind of FAULT_KINDS) {
    if (!kinds.has(kind) || kind === 'skew' || shouldStop()) continue;
    if (kind === 'pin') {
      ctx.log(`fault: pin (held ${ctx.config.pinMs / 1000} s in the background)`);
      pinXmin(ctx).then(
        (record) => records.push(record),
        (err) => errors.push(`pin: ${err?.message ?? err}`),
      );
      await sleep(200);
      continue;
    }
    await inject(kind);
    await gap();
  }
  const drawable = RANDOM_KINDS.filter((kind) => kinds.has(kind));
  while (drawable.length > 0 && !productionDone() && !shouldStop()) {
    await inject(drawable[Math.floor(ctx.rng() * drawable.length)]);
    await gap();
  }
  await ctx.pin?.done.catch(() => {});
  return { records, errors };
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
