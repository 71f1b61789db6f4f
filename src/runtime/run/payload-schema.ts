import type { StandardSchemaV1 } from '@standard-schema/spec';
import { ValidationError } from '../../shared/errors.js';
import { bounded } from '../../shared/validation.js';
import { PermanentError } from './job-errors.js';

/** Longest description of a schema issue kept (path and message), in characters. */
export const MAX_SCHEMA_ISSUE = 300;

/** A payload checked against a task's schema: the schema's output, or its first issue described. */
export type PayloadCheck = { ok: true; value: unknown } | { ok: false; issue: string };

/** True when `value` looks like a Standard Schema validator (zod, valibot, arktype...). */
export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const standard = (value as { '~standard'?: { version?: unknown; validate?: unknown } })['~standard'];
  return typeof standard === 'object' && standard !== null && typeof standard.validate === 'function';
}

/**
 * Runs a Standard Schema validator on a payload. A validator may answer synchronously or with a
 * promise; a synchronous answer is returned as is, so a caller that needs no await pays none.
 * A validator that throws counts as an issue (its message kept, bounded).
 */
export function checkPayload(
  schema: StandardSchemaV1,
  payload: unknown,
): PayloadCheck | Promise<PayloadCheck> {
  let result: StandardSchemaV1.Result<unknown> | Promise<StandardSchemaV1.Result<unknown>>;
  try {
    result = schema['~standard'].validate(payload);
  } catch (err) {
    return thrown(err);
  }
  return result instanceof Promise ? result.then(toCheck, thrown) : toCheck(result);
}

/**
 * Validates an enqueued payload against its task's schema: `ValidationError` (field `payload`)
 * naming the task and the first issue's path and message, before anything is written.
 */
export async function assertPayloadMatches(
  task: string,
  schema: StandardSchemaV1,
  payload: unknown,
  field: string,
): Promise<void> {
  const check = await checkPayload(schema, payload);
  if (!check.ok) throw new ValidationError(field, `does not match task ${task}'s schema: ${check.issue}`);
}

function toCheck(result: StandardSchemaV1.Result<unknown>): PayloadCheck {
  if (result.issues === undefined) return { ok: true, value: result.value };
  return { ok: false, issue: describeIssue(result.issues[0]) };
}

function thrown(err: unknown): PayloadCheck {
  return {
    ok: false,
    issue: `validator threw: ${bounded(err instanceof Error ? err.message : String(err), 200)}`,
  };
}

// "items[0].email: Invalid email address", bounded: the path is the schema's, the message the
// validator's own words (never the payload itself).
function describeIssue(issue: StandardSchemaV1.Issue | undefined): string {
  if (issue === undefined) return 'rejected by the schema';
  let path = '';
  for (const segment of issue.path ?? []) {
    const key = typeof segment === 'object' && segment !== null ? segment.key : segment;
    if (typeof key === 'number') path += `[${key}]`;
    else path += path === '' ? String(key) : `.${String(key)}`;
  }
  return bounded(`${path === '' ? '(root)' : path}: ${issue.message}`, MAX_SCHEMA_ISSUE) as string;
}

/**
 * Checks a claimed job's stored payload against its task's schema, in this process (no database
 * round trip), and hands the handler the schema's output. A payload that no longer matches (an
 * older version, a hand-inserted row) throws a `PermanentError` with code `PAYLOAD_SCHEMA`: the
 * worker's ordinary failure path records it in the batched fail statement, dead at once, no retry
 * spent, with the issue (path and the validator's message, bounded) in the job's history.
 */
export async function applyTaskSchema(
  job: { queue: string; payload: unknown },
  schema: StandardSchemaV1,
): Promise<void> {
  const pending = checkPayload(schema, job.payload);
  const check = pending instanceof Promise ? await pending : pending;
  if (!check.ok) {
    throw new PermanentError(`stored payload does not match task ${job.queue}'s schema: ${check.issue}`, {
      code: 'PAYLOAD_SCHEMA',
    });
  }
  job.payload = check.value;
}
