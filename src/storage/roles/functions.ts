/**
 * The schema's SECURITY DEFINER functions: how the producer and worker roles make their transitions
 * without any right to write the tables (issue 17; docs/security.md, "Database roles").
 *
 * Each entry of FUNCTIONS names a statement of this folder. Its function's body IS that statement's
 * text (SQL functions take $1..$n positionally), so there is one copy of the SQL: the owner's client
 * runs the statement, a `viaFunctions` client runs `SELECT * FROM schema.fn($1, ..., $n)` with the
 * same parameters and gets the same rows, and the fence inside the text applies either way.
 * Before it, each body checks its arguments against the API's bounds (function-bounds.ts, issue 32):
 * a direct call with a batch, lease, delay, text or channel the library would never send is refused
 * with SQLSTATE 22023 before the statement runs.
 * The migrator creates the functions (migrate(), see installFunctions in migrations/functions.ts):
 * owned by the migrating role (the schema owner), `SET search_path = pg_catalog, pg_temp` (the text
 * qualifies every table with the schema, so nothing can be shadowed), EXECUTE revoked from PUBLIC
 * and granted to `<schema>_<role>` and the admin roles by grant_function_roles() (migration 016),
 * which finds them by their comment `leasehold:<role>:<label>`.
 *
 * A function's name carries a digest of its definition, so a library version that changes a
 * statement creates a new function beside the old one: processes of both versions keep working
 * during a rolling upgrade, and migrate() only has to check that this version's names exist.
 *
 * To give a new transition a function: export its statement and add one line below
 * (`args`: the parameter types in $n order, as PREPARE infers them; `returns`: the result columns
 * with their names and types, or null for a statement without RETURNING).
 * test/storage/definer-functions.test.ts checks both against the server for every entry.
 */
import { createHash } from 'node:crypto';
import { defineStatement, quoteIdent, type Statement } from '../db.js';
import { EffectBegin, EffectRearm, EffectRecordResult } from '../flows/effects.js';
import { FlowInsert } from '../flows/flows.js';
import { DURABLE_STEP_FUNCTIONS } from '../flows/steps.js';
import * as enqueue from '../jobs/enqueue.js';
import { JobGetById, JobGetByIdWithoutPayload } from '../jobs/read.js';
import { JobTraceAttach } from '../jobs/traces.js';
import { CLAIM_FUNCTIONS } from '../leases/claim/functions.js';
import {
  JobCompleteMany,
  JobCompleteManyWithResults,
  JobCompletePlainMany,
  JobCompletePlainManyWithResults,
} from '../leases/complete.js';
import { JobFailMany, JobSnoozeMany } from '../leases/fail.js';
import { JobExtendLeaseMany } from '../leases/heartbeat.js';
import { RefusalRecord } from '../leases/job-transaction.js';
import { JobRecoverExpired } from '../leases/recover.js';
import {
  OrderingKeyRepairListed,
  OrderingKeyRepairScan,
  OrderingKeyRepairSweep,
} from '../queues/ordering.js';
import {
  ScheduleGet,
  ScheduleGetWithoutPayload,
  ScheduleList,
  ScheduleListWithoutPayload,
} from '../schedules/schedules.js';
import { JobAgePending } from '../upkeep/aging.js';
import { boundsCheck } from './function-bounds.js';

/** Which per-schema role may execute a function (the admin roles may execute every one). */
export type FunctionRole = 'producer' | 'worker';

/** One statement that the producer or worker role runs as a SECURITY DEFINER function. */
export interface FunctionEntry {
  readonly statement: (schema: string) => Statement;
  readonly role: FunctionRole;
  /** Parameter types, in $1..$n order. */
  readonly args: string;
  /** The result columns (`name type, ...`), or null: the function returns void. */
  readonly returns: string | null;
}

const FENCE = 'bigint[], bigint[], bigint[], text[], text[]';
const COMPLETED =
  'id bigint, deferred boolean, repair text[], woken bigint, announced bigint, flow_woken bigint';
const COMPLETED_PLAIN = 'deferred_ids text[], refused_ids text[], announced bigint';
const REPAIRED = `seen integer, released integer, removed integer, missed integer, woken bigint,
  last_queue text, last_key text`;

/** Every statement that goes through a function, one line each. */
export const FUNCTIONS: readonly FunctionEntry[] = [
  // The worker: claim (plain, per-key, throttled, round-robin), renew (with progress), complete (with results),
  // fail, snooze, the effects ledger, durable steps, recovery, fairness, ordering repair.
  ...CLAIM_FUNCTIONS,
  {
    // A job's progress rides the renewal ($7): no statement of its own.
    role: 'worker',
    statement: JobExtendLeaseMany,
    args: `${FENCE}, double precision[], text[], text`,
    returns: 'id bigint, lease_expires_at timestamptz, lease_token bigint, lease_claim_id bigint',
  },
  {
    role: 'worker',
    statement: JobCompleteMany,
    args: `${FENCE}, text, text, text`,
    returns: COMPLETED,
  },
  {
    // With the handlers' results (011); both completions release flow children (014), and only
    // for the rows the fence accepted.
    role: 'worker',
    statement: JobCompleteManyWithResults,
    args: `${FENCE}, text, text[], text, text`,
    returns: COMPLETED,
  },
  {
    // A batch of plain jobs (no ordering key, key slot or flow children; claim.ts `plain`): the
    // fence, the lane move, the count of refusals and the notices only (complete.ts).
    role: 'worker',
    statement: JobCompletePlainMany,
    args: `${FENCE}, text, text`,
    returns: COMPLETED_PLAIN,
  },
  {
    role: 'worker',
    statement: JobCompletePlainManyWithResults,
    args: `${FENCE}, text[], text, text`,
    returns: COMPLETED_PLAIN,
  },
  {
    role: 'worker',
    statement: JobFailMany,
    args: `${FENCE}, boolean[], double precision[], double precision[], double precision[], integer[], text[], text[], text[], text[], text, text, text`,
    returns: 'id bigint, status text, announced bigint, flow_woken bigint',
  },
  {
    role: 'worker',
    statement: JobSnoozeMany,
    args: `${FENCE}, double precision[], text[], text`,
    returns: 'id bigint',
  },
  {
    role: 'worker',
    statement: EffectBegin,
    args: 'bigint, bigint, bigint, text, text, text, text',
    returns: 'held boolean, recorded boolean, has_result boolean, uncertain boolean, result jsonb',
  },
  {
    role: 'worker',
    statement: EffectRecordResult,
    args: 'bigint, bigint, bigint, text, text, text, jsonb',
    returns: 'recorded boolean',
  },
  {
    role: 'worker',
    statement: EffectRearm,
    args: 'bigint, bigint, bigint, text, text, text',
    returns: 'rearmed boolean',
  },
  // Durable steps (024), events (025) and invokes (026): written only under the job's lease.
  ...DURABLE_STEP_FUNCTIONS,
  { role: 'worker', statement: RefusalRecord, args: 'text, bigint, text, bigint', returns: null },
  {
    role: 'worker',
    statement: JobRecoverExpired,
    args: 'bigint, double precision, double precision, text, text',
    returns:
      'retried integer, dead integer, woken integer, flow_woken bigint, announced integer, max_delay_ms double precision',
  },
  { role: 'worker', statement: JobAgePending, args: 'text, bigint', returns: 'raised integer' },
  {
    role: 'worker',
    statement: OrderingKeyRepairListed,
    args: 'text[], text[], bigint, text',
    returns: REPAIRED,
  },
  { role: 'worker', statement: OrderingKeyRepairSweep, args: 'bigint, text', returns: REPAIRED },
  { role: 'worker', statement: OrderingKeyRepairScan, args: 'bigint, text, text, text', returns: REPAIRED },
  // The producer: enqueue one, many, keyed, ordered, deduped, a flow, and the trace context of what it enqueued.
  {
    role: 'producer',
    statement: enqueue.JobInsert,
    args: 'text, jsonb, integer, timestamptz, double precision, integer, text, text',
    returns: 'id bigint, notified text',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertQuiet,
    args: 'text, jsonb, integer, timestamptz, double precision, integer, text',
    returns: 'id bigint',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertMany,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[]',
    returns: 'ids text[], notified text',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertManyQuiet,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[]',
    returns: 'ids text[], quiet boolean',
  },
  {
    // Fairness keys (022): only enqueues that carry one name the column.
    role: 'producer',
    statement: enqueue.JobInsertManyFair,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[], text[]',
    returns: 'ids text[], notified text',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertManyFairQuiet,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[], text[]',
    returns: 'ids text[], quiet boolean',
  },
  {
    // A uniform batch (claimable now, one priority and attempt budget, no key): payloads only.
    role: 'producer',
    statement: enqueue.JobInsertManyUniform,
    args: 'text, jsonb, integer, integer, text, uuid[]',
    returns: 'first_id text, n integer, ids text[], notified text',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertManyUniformQuiet,
    args: 'text, jsonb, integer, integer, text, uuid[]',
    returns: 'first_id text, n integer, ids text[], quiet boolean',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertKeyed,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[], text[]',
    returns: 'id text, created boolean, notified bigint',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertKeyedFair,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[], text[], text[]',
    returns: 'id text, created boolean, notified bigint',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertOrdered,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[], text[]',
    returns: 'ids text[], notified text',
  },
  {
    role: 'producer',
    statement: enqueue.JobInsertOrderedFair,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[], text[], text[]',
    returns: 'ids text[], notified text',
  },
  {
    // Dedupe modes (013): the producer may dedupe, as the enqueue API promises (a replace cancels
    // the running job its key names, fenced by a token bump), and only that: dedupe_keys are
    // written by no other path.
    role: 'producer',
    statement: enqueue.JobInsertDeduped,
    args: 'text, text[], integer[], timestamptz[], double precision[], integer[], text, text[], text[], text[], text[], double precision[], integer[], boolean',
    returns: 'id text, outcome text, cancelled_id text, notified bigint',
  },
  {
    // Flows (014): the job ids are drawn inside, and edges name node positions, so a caller can
    // neither choose an id nor link a job it did not just create.
    role: 'producer',
    statement: FlowInsert,
    args: 'text[], text[], integer[], timestamptz[], double precision[], integer[], text[], text[], integer[], boolean[], text[], integer[], integer[], text',
    returns: 'flow_id text, ids text[], inserted integer, woken bigint',
  },
  { role: 'producer', statement: JobTraceAttach, args: 'bigint[], text', returns: null },
];

/**
 * Reads that the producer and worker roles run in another form: they may read jobs and schedules
 * but not payloads, so getJob and the schedule reads run without one (the payload reads null).
 */
const STAND_INS: readonly (readonly [(schema: string) => Statement, (schema: string) => Statement])[] = [
  [JobGetById, JobGetByIdWithoutPayload],
  [ScheduleList, ScheduleListWithoutPayload],
  [ScheduleGet, ScheduleGetWithoutPayload],
];

/** One entry made concrete for a schema: its function's name, DDL and call. */
export interface SchemaFunction {
  readonly role: FunctionRole;
  /** The statement's short name (`claim_jobs`). */
  readonly label: string;
  /** The function's name, unquoted (`lh_claim_jobs_<digest>`). */
  readonly name: string;
  /** `"schema".name(args)`: what GRANT, COMMENT and DROP take. */
  readonly signature: string;
  /** CREATE FUNCTION and its COMMENT, each one statement. */
  readonly create: readonly string[];
  /** The direct statement it replaces, and the call that replaces it. */
  readonly direct: Statement;
  readonly call: Statement;
}

// The body's quote: a statement text containing it could not be a body (checked below).
const BODY_QUOTE = '$leasehold_fn$';
const bySchema = new Map<string, readonly SchemaFunction[]>();

/** The functions of `schema`, built once per schema. */
export function schemaFunctions(schema: string): readonly SchemaFunction[] {
  let built = bySchema.get(schema);
  if (!built) {
    built = FUNCTIONS.map((entry) => buildFunction(schema, entry));
    bySchema.set(schema, built);
  }
  return built;
}

function buildFunction(schema: string, entry: FunctionEntry): SchemaFunction {
  const s = quoteIdent(schema);
  const direct = entry.statement(schema);
  if (direct.text.includes(BODY_QUOTE)) throw new Error(`${direct.label}: its text holds ${BODY_QUOTE}`);
  const returns = entry.returns === null ? 'void' : `TABLE (${entry.returns})`;
  const definition = `(${entry.args}) RETURNS ${returns}
  LANGUAGE sql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS ${BODY_QUOTE}${boundsCheck(schema, direct.label)}${direct.text}${BODY_QUOTE}`;
  const digest = createHash('sha1').update(definition).digest('hex').slice(0, 10);
  const name = `lh_${direct.label}_${digest}`;
  const signature = `${s}.${quoteIdent(name)}(${entry.args})`;
  const arity = entry.args.split(',').length;
  const placeholders = Array.from({ length: arity }, (_, i) => `$${i + 1}`).join(', ');
  const call = defineStatement(
    direct.label,
    () => `SELECT * FROM ${s}.${quoteIdent(name)}(${placeholders})`,
  )(schema);
  return {
    role: entry.role,
    label: direct.label,
    name,
    signature,
    create: [
      `CREATE FUNCTION ${s}.${quoteIdent(name)}${definition}`,
      `COMMENT ON FUNCTION ${signature} IS 'leasehold:${entry.role}:${direct.label}'`,
    ],
    direct,
    call,
  };
}

/**
 * What a `viaFunctions` client runs in place of each direct statement of `schema`, by the direct
 * statement's name (see `routeOn` in db.ts): the function calls, and the payload-free reads.
 */
export function functionRoutes(schema: string): ReadonlyMap<string, Statement> {
  let routes = routesBySchema.get(schema);
  if (!routes) {
    const built = new Map<string, Statement>();
    for (const fn of schemaFunctions(schema)) built.set(fn.direct.name, fn.call);
    for (const [direct, standIn] of STAND_INS) built.set(direct(schema).name, standIn(schema));
    routes = built;
    routesBySchema.set(schema, routes);
  }
  return routes;
}

const routesBySchema = new Map<string, ReadonlyMap<string, Statement>>();
