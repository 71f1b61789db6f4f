// The steps workload (`--steps N`): every job the producer makes is a workflow of N durable steps
// (job.step), half of them with a short durable sleep (job.sleep) halfway through, run by the
// workers under the nemesis's kills, pauses and restarts. Each step's side effect is a ledger row
// (chaos.step_effects) written, and committed, before the step returns its value: the job id, the
// step's numbered name, the claim (token, claim id, owner) that ran it, and a value unique to that
// run, which the step returns and Leasehold records. steps-checker.mjs then matches every recorded
// step to the one effect run whose value it holds.
import { randomUUID } from 'node:crypto';

/** One workflow's payload: N steps of 2 to 20 ms of work each, maybe a sleep before a middle step. */
export function makeWorkflow(rng, steps) {
  const sleeps = steps > 1 && rng() < 0.5;
  return {
    mode: 'steps',
    steps,
    workMs: 2 + Math.floor(rng() * 18),
    sleepBefore: sleeps ? Math.floor(steps / 2) : -1,
    sleepMs: 20 + Math.floor(rng() * 180),
  };
}

/**
 * A workflow's handler body: the steps in order, each running its effect only when no earlier
 * attempt recorded it. The sleep hands the job back (job.sleep throws a SnoozeError the caller must
 * let through). Nothing checks the lease before an effect: a paused holder's effect may run after
 * its lease is gone, and the fence must then refuse its record.
 */
export async function runSteps(job, { ledger, owner, claimId }) {
  const { steps, workMs, sleepBefore, sleepMs } = job.payload;
  for (let i = 0; i < steps; i++) {
    if (i === sleepBefore) await job.sleep('nap', sleepMs);
    const name = `s${i}`;
    await job.step(name, async () => {
      await new Promise((resolve) => setTimeout(resolve, workMs));
      const value = randomUUID();
      await ledger.stepEffect(job.id, `${name}#0`, job.token, claimId, owner, value);
      return value;
    });
  }
}
