import { describe, expectTypeOf, it } from 'vitest';
import {
  type ClientClosedError,
  type DatabaseError,
  type EmbeddedPostgresError,
  isLeaseholdError,
  type JobCancelledError,
  type JobDeadError,
  type JobNotFoundError,
  type JobStateError,
  type LeaseholdError,
  type LeaseLostError,
  type PermissionError,
  type QueueNotFoundError,
  type SchemaVersionError,
  type ValidationError,
  type WaitAbortedError,
  type WaitTimeoutError,
} from '../../src/index.js';

// Compile-time guarantees of isLeaseholdError (issue 38): the code given narrows to its class.

declare const err: unknown;

describe('isLeaseholdError narrows to the class of the code', () => {
  it('each code gives its class, and its fields compile', () => {
    if (isLeaseholdError(err, 'VALIDATION')) {
      expectTypeOf(err).toEqualTypeOf<ValidationError>();
      expectTypeOf(err.field).toEqualTypeOf<string>();
    }
    if (isLeaseholdError(err, 'SCHEMA_VERSION')) expectTypeOf(err).toEqualTypeOf<SchemaVersionError>();
    if (isLeaseholdError(err, 'DATABASE')) {
      expectTypeOf(err).toEqualTypeOf<DatabaseError>();
      expectTypeOf(err.sqlState).toEqualTypeOf<string | undefined>();
      expectTypeOf(err.errno).toEqualTypeOf<string | undefined>();
      expectTypeOf(err.statement).toEqualTypeOf<string | undefined>();
    }
    if (isLeaseholdError(err, 'PERMISSION_DENIED')) expectTypeOf(err).toEqualTypeOf<PermissionError>();
    if (isLeaseholdError(err, 'LEASE_LOST')) expectTypeOf(err).toEqualTypeOf<LeaseLostError>();
    if (isLeaseholdError(err, 'WORKER_STATE')) expectTypeOf(err).toEqualTypeOf<LeaseholdError>();
    if (isLeaseholdError(err, 'JOB_NOT_FOUND')) {
      expectTypeOf(err).toEqualTypeOf<JobNotFoundError>();
      expectTypeOf(err.jobIds).toEqualTypeOf<readonly string[]>();
    }
    if (isLeaseholdError(err, 'JOB_STATE')) expectTypeOf(err).toEqualTypeOf<JobStateError>();
    if (isLeaseholdError(err, 'EMBEDDED_POSTGRES')) expectTypeOf(err).toEqualTypeOf<EmbeddedPostgresError>();
    if (isLeaseholdError(err, 'JOB_DEAD')) {
      expectTypeOf(err).toEqualTypeOf<JobDeadError>();
      expectTypeOf(err.jobId).toEqualTypeOf<string>();
    }
    if (isLeaseholdError(err, 'JOB_CANCELLED')) expectTypeOf(err).toEqualTypeOf<JobCancelledError>();
    if (isLeaseholdError(err, 'WAIT_TIMEOUT')) expectTypeOf(err).toEqualTypeOf<WaitTimeoutError>();
    if (isLeaseholdError(err, 'WAIT_ABORTED')) expectTypeOf(err).toEqualTypeOf<WaitAbortedError>();
    if (isLeaseholdError(err, 'CLIENT_CLOSED')) expectTypeOf(err).toEqualTypeOf<ClientClosedError>();
    if (isLeaseholdError(err, 'QUEUE_NOT_FOUND')) {
      expectTypeOf(err).toEqualTypeOf<QueueNotFoundError>();
      expectTypeOf(err.closest).toEqualTypeOf<readonly string[]>();
    }
  });

  it('without a code, the base class; an unknown code does not compile', () => {
    if (isLeaseholdError(err)) expectTypeOf(err).toEqualTypeOf<LeaseholdError>();
    // @ts-expect-error not a Leasehold error code
    void isLeaseholdError(err, 'NOT_A_CODE');
  });
});
