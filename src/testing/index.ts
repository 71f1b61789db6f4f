/**
 * `leasehold/testing`: helpers for your own test files, on real PostgreSQL (no fakes), that work
 * under Vitest, Jest and node:test alike. Importing `leasehold` never loads this module.
 */
export type { PendingJob } from '../storage/jobs/pending.js';
export type { TestLeasehold, TestLeaseholdOptions } from './database.js';
export { createTestLeasehold } from './database.js';
export { DEFAULT_DRAIN_MS, drain } from './drain.js';
export { TestExpectationError } from './errors.js';
export type { ClientLike, ExpectEnqueuedOptions } from './expect-enqueued.js';
export { expectEnqueued } from './expect-enqueued.js';
export type { PartialPayload, PayloadMatch } from './payload-match.js';
