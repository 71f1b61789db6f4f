import type { Lease } from '../../records/lease.js';
import { LeaseLostError, ValidationError } from '../../shared/errors.js';
import { serialisePayload } from '../../shared/validation.js';
import type { Queryable } from '../../storage/db.js';
import { beginEffect, rearmEffect, recordEffectResult } from '../../storage/flows/effects.js';
import { UncertainEffectError } from '../run/job-errors.js';
import { beforeDeadline } from './lease-deadline.js';

/** Largest effect result accepted, as JSON bytes: the ledger keeps receipts, not documents. */
export const MAX_EFFECT_RESULT_BYTES = 64 * 1024;

const EFFECT_NAME = /^[A-Za-z0-9_.:-]{1,100}$/;

/** What `reconcile` says about an effect whose earlier outcome is unknown. */
export type ReconcileAnswer<T> = { happened: true; result: T } | { happened: false };

/** An external side effect run through the effects ledger. */
export interface EffectSpec<T> {
  /** Performs the side effect; `key` is stable across every attempt (pass it downstream). */
  perform: (key: string) => Promise<T> | T;
  /**
   * Called instead of `perform` when an earlier attempt recorded the intent but no result: look the
   * effect up by `key` downstream and say whether it happened (and its result) or not (perform again).
   */
  reconcile?: (key: string) => Promise<ReconcileAnswer<T>> | ReconcileAnswer<T>;
}

/** Where an effect is recorded and the lease that fences it. */
export interface EffectHost {
  readonly db: Queryable;
  readonly schema: string;
  readonly lease: Lease;
  readonly idempotencyKey: string;
  /** The lease is still ours as far as this process can tell. */
  readonly holdsLease: boolean;
  /** When the worker must consider the lease gone (performance.now() time; renewals move it). */
  readonly deadline: number;
  /** Called when the database refused a write: the lease is gone. */
  lostLease(): void;
}

/**
 * Runs one effect: intent recorded (fenced) before `perform`, result recorded (fenced) after. A
 * result recorded by an earlier attempt is returned without performing; an intent without a result
 * goes to `reconcile`, or, without one, fails the job for good with `UNCERTAIN_EFFECT`. Results come
 * back as stored (JSON), so every path returns the same shape. An error thrown by `perform` leaves
 * the outcome uncertain: the next attempt reconciles it.
 */
export async function runEffect<T>(host: EffectHost, name: string, spec: EffectSpec<T>): Promise<T> {
  if (typeof name !== 'string' || !EFFECT_NAME.test(name)) {
    throw new ValidationError('effect name', 'must be 1 to 100 letters, digits or _ - . :');
  }
  if (typeof spec !== 'object' || spec === null || typeof spec.perform !== 'function') {
    throw new ValidationError('effect', 'give { perform: (key) => ..., reconcile?: (key) => ... }');
  }
  if (spec.reconcile !== undefined && typeof spec.reconcile !== 'function') {
    throw new ValidationError('effect.reconcile', 'must be a function (key) => { happened, result }');
  }
  const key = `${host.idempotencyKey}:${name}`;
  const lost = (what: string) => {
    host.lostLease();
    return new LeaseLostError(`the lease on job ${host.lease.jobId} was lost; ${what}`);
  };
  if (!host.holdsLease) throw lost(`effect "${name}" was not started`);

  const state = await beforeDeadline(host, beginEffect(host.db, host.schema, host.lease, name, key), () =>
    lost(`effect "${name}" was not started (no answer from the database before the lease ran out)`),
  );
  if (!state.held) throw lost(`effect "${name}" was not started`);
  if (state.hasResult) return state.result as T;
  if (state.uncertain) {
    if (!spec.reconcile) throw new UncertainEffectError(name);
    const answer = await spec.reconcile(key);
    if (typeof answer !== 'object' || answer === null || typeof answer.happened !== 'boolean') {
      throw new ValidationError('reconcile', 'must return { happened: true, result } or { happened: false }');
    }
    if (answer.happened) return record(host, name, answer.result, lost);
    const rearmed = await beforeDeadline(host, rearmEffect(host.db, host.schema, host.lease, name), () =>
      lost(`effect "${name}" was not performed again (no answer before the lease ran out)`),
    );
    if (!rearmed) {
      throw lost(`effect "${name}" was not performed again`);
    }
  } else if (!state.recorded) {
    throw new Error(`leasehold: effect "${name}" of job ${host.lease.jobId} is in an unexpected state`);
  }
  // Checked again after the round trips above: a process frozen while they were in flight (a
  // SIGSTOP, a long GC pause) may resume after its successor took the job; the monotonic deadline
  // tells at once, without another round trip, that performing now could duplicate the effect.
  if (!host.holdsLease) throw lost(`effect "${name}" was not performed`);
  const result = await spec.perform(key);
  return record(host, name, result, lost);
}

async function record<T>(
  host: EffectHost,
  name: string,
  result: T,
  lost: (what: string) => LeaseLostError,
): Promise<T> {
  const json = serialisePayload(result ?? null, MAX_EFFECT_RESULT_BYTES, `effect "${name}" result`);
  const recorded = await beforeDeadline(
    host,
    recordEffectResult(host.db, host.schema, host.lease, name, json),
    () =>
      lost(
        `effect "${name}" may have happened but its result was not recorded before the lease ran out (the next attempt reconciles it)`,
      ),
  );
  if (!recorded) {
    throw lost(
      `effect "${name}" may have happened but its result was not recorded (the next attempt reconciles it)`,
    );
  }
  return JSON.parse(json) as T;
}
