/**
 * The schema's stable SQL API (issue 33, migration 023; docs/sql-api.md): three functions whose
 * names and signatures never change, for producers in any language, inside their own transaction:
 *
 *   enqueue(queue text, payload jsonb, options jsonb DEFAULT '{}') RETURNS bigint
 *   enqueue_many(queue text, payloads jsonb, options jsonb DEFAULT '{}') RETURNS bigint[]
 *   job_status(id bigint) RETURNS text
 *
 * Their bodies are written here, from this version: they check the arguments as `lh.enqueue` does
 * (the same option names, limits and messages; the checks of one value are migration 023's
 * `api_*` helpers) and then call this version's statement functions (functions.ts: the same
 * statements the client runs, with their bounds), with the schema's wake-up channel, so workers
 * wake on commit as for any enqueue. migrate() creates them with CREATE OR REPLACE whenever the
 * schema's are not this version's (their comment carries a digest of the three definitions): a
 * version that changes a statement replaces the bodies and keeps the names, the signatures and
 * the grants. SECURITY DEFINER, owned by the schema's owner, EXECUTE for `<schema>_producer` and
 * the admin roles (grant_function_roles(), by the comment `leasehold:producer:...`).
 * During a rolling upgrade, a process of the older version that runs migrate() writes its own
 * bodies back (their comment differs); both call statement functions that stay installed, so
 * either body works, and the newer version's next migrate() writes its own again.
 */
import { createHash } from 'node:crypto';
import { MAX_ATTEMPTS_LIMIT } from '../../shared/config.js';
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_PRIORITY } from '../../shared/defaults.js';
import {
  DEDUPE_FIELDS,
  DEDUPE_MODES,
  ENQUEUE_OPTION_KEYS,
  JOB_FIELDS,
  MAX_DEDUPE_WINDOW_MS,
  MAX_ENQUEUE_DELAY_MS,
  MAX_KEY_CHARS,
} from '../../shared/enqueue-fields.js';
import {
  MAX_ENQUEUE_MANY,
  MAX_ENQUEUE_MANY_BYTES,
  MAX_JSON_DEPTH,
  PRIORITY_LIMIT,
} from '../../shared/validation.js';
import { quoteIdent } from '../db.js';
import { wakeupChannel } from '../jobs/enqueue.js';
import { JobGetByIdWithoutPayload } from '../jobs/read.js';
import { schemaFunctions } from './functions.js';

/** The first schema version with the SQL API's helpers (migration 023). */
export const SQL_API_VERSION = 23;

/** The SQL API's function names, which never change. */
export const SQL_API_NAMES = ['enqueue', 'enqueue_many', 'job_status'] as const;

/** The options the SQL `enqueue` takes: `lh.enqueue`'s, but `client` (the caller's session is its transaction). */
// fairnessKey (round-robin queues, issue 34) is not in the SQL API yet: its functions would refuse
// it as an unknown option rather than drop it.
export const SQL_ENQUEUE_OPTIONS: readonly string[] = ENQUEUE_OPTION_KEYS.filter(
  (key) => key !== 'client' && key !== 'fairnessKey',
);

/** The options the SQL `enqueue_many` takes, for every job of the call: a job's own fields. */
export const SQL_ENQUEUE_MANY_OPTIONS: readonly string[] = JOB_FIELDS;

/** The SQL API of one schema: its statements, and the comment that says which version wrote them. */
export interface SqlApi {
  /** CREATE OR REPLACE FUNCTION and COMMENT statements, in order. */
  readonly create: readonly string[];
  /** The comment every function of this version carries. */
  readonly comment: string;
}

const BODY = '$leasehold_api$';
const built = new Map<string, SqlApi>();

/** SQL text of a string literal (standard_conforming_strings). */
function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

function textArray(items: readonly string[]): string {
  return `ARRAY[${items.map(literal).join(', ')}]::text[]`;
}

/** This version's SQL API for `schema`, built once per schema. */
export function sqlApi(schema: string): SqlApi {
  let api = built.get(schema);
  if (!api) {
    api = buildSqlApi(schema);
    built.set(schema, api);
  }
  return api;
}

function buildSqlApi(schema: string): SqlApi {
  const s = quoteIdent(schema);
  const fn = (label: string) => {
    const found = schemaFunctions(schema).find((f) => f.label === label);
    if (!found) throw new Error(`sql-api: no statement function ${label}`);
    return `${s}.${quoteIdent(found.name)}`;
  };
  const channel = literal(wakeupChannel(schema));
  const definitions = [
    `FUNCTION ${s}.enqueue(queue text, payload jsonb, options jsonb DEFAULT '{}'::jsonb) RETURNS bigint
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS ${BODY}
DECLARE
${JOB_VARIABLES}
  v_dedupe jsonb;
  v_dedupe_key text;
  v_mode text;
  v_window_ms double precision;
  v_key text;
  v_outcome text;
  v_constraint text;
BEGIN
${queueCheck(s)}
${optionsCheck(s, SQL_ENQUEUE_OPTIONS)}
${jobChecks(s)}
  IF payload IS NULL THEN
    PERFORM ${s}.api_refuse('payload', 'must be a JSON value, not SQL NULL (pass ''null''::jsonb for a JSON null)');
  END IF;
  IF pg_catalog.octet_length(payload::text) > ${DEFAULT_MAX_PAYLOAD_BYTES} THEN
    PERFORM ${s}.api_refuse('payload', pg_catalog.format('is %s bytes as JSON, over the limit of %s',
      pg_catalog.octet_length(payload::text), ${DEFAULT_MAX_PAYLOAD_BYTES}));
  END IF;
  IF ${tooDeep('payload')} THEN
    PERFORM ${s}.api_refuse('payload', ${literal(TOO_DEEP)});
  END IF;
${jobValues(s)}
  -- dedupe (operations/enqueue-dedupe.ts, parseDedupe)
  v_dedupe := v_options -> 'dedupe';
  IF v_dedupe IS NOT NULL THEN
    IF pg_catalog.jsonb_typeof(v_dedupe) <> 'object' THEN
      PERFORM ${s}.api_refuse('options.dedupe', 'must be an object { key, mode, windowMs }');
    END IF;
    PERFORM ${s}.api_reject_unknown(v_dedupe, ${textArray(DEDUPE_FIELDS)}, 'options.dedupe');
    v_dedupe_key := ${s}.api_text(coalesce(v_dedupe -> 'key', 'null'::jsonb), 'options.dedupe.key', ${MAX_KEY_CHARS});
    IF pg_catalog.jsonb_typeof(v_dedupe -> 'mode') IS DISTINCT FROM 'string'
        OR NOT (v_dedupe ->> 'mode') = ANY (${textArray(DEDUPE_MODES)}) THEN
      PERFORM ${s}.api_refuse('options.dedupe.mode', ${literal(`must be one of ${DEDUPE_MODES.join(', ')}`)});
    END IF;
    v_mode := v_dedupe ->> 'mode';
    IF v_mode = 'replace' THEN
      IF v_dedupe ? 'windowMs' THEN
        PERFORM ${s}.api_refuse('options.dedupe.windowMs', 'is not used by mode replace; leave it out');
      END IF;
    ELSE
      IF NOT v_dedupe ? 'windowMs' THEN
        PERFORM ${s}.api_refuse('options.dedupe.windowMs', 'is required by mode ' || v_mode);
      END IF;
      v_window_ms := ${s}.api_int(v_dedupe -> 'windowMs', 'options.dedupe.windowMs', 1, ${MAX_DEDUPE_WINDOW_MS});
    END IF;
    IF v_mode = 'debounce' AND (v_options ? 'runAt' OR v_options ? 'delayMs') THEN
      PERFORM ${s}.api_refuse(CASE WHEN v_options ? 'runAt' THEN 'options.runAt' ELSE 'options.delayMs' END,
        'cannot be combined with dedupe mode debounce, which runs the job windowMs after the last enqueue');
    END IF;
    IF v_options ? 'idempotencyKey' THEN
      PERFORM ${s}.api_refuse('options.idempotencyKey',
        'cannot be combined with dedupe; use one or the other (idempotencyKey keeps the first job while it is retained)');
    END IF;
    -- Run again for a key a concurrent enqueue moved after the statement's snapshot ('stale'):
    -- each run's snapshot includes one more committed racer (READ COMMITTED).
    FOR v_run IN 1..50 LOOP
      BEGIN
        SELECT r.id::bigint, r.outcome INTO v_id, v_outcome
        FROM ${fn('enqueue_deduped')}(queue, ARRAY[payload::text], ARRAY[v_priority], ARRAY[v_run_at],
          ARRAY[v_delay_ms], ARRAY[v_max_attempts], ${channel}, ARRAY[v_ordering_key], ARRAY[v_concurrency_key],
          ARRAY[v_dedupe_key], ARRAY[v_mode], ARRAY[v_window_ms], ARRAY[0], true) AS r;
      EXCEPTION WHEN check_violation OR unique_violation OR foreign_key_violation THEN
        GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
        IF v_constraint = 'dedupe_keys_ordering_key_mismatch' THEN
          PERFORM ${s}.api_refuse('options.orderingKey', 'differs from the ordering key of the pending or running job its dedupe key names; a dedupe key must keep one ordering key (nothing was written)');
        END IF;
        RAISE;
      END;
      IF v_outcome <> 'stale' THEN RETURN v_id; END IF;
    END LOOP;
    RAISE EXCEPTION 'leasehold: enqueue: a dedupe key kept moving under 50 runs of the statement; try again'
      USING ERRCODE = 'serialization_failure';
  END IF;
  v_key := ${s}.api_text(v_options -> 'idempotencyKey', 'options.idempotencyKey', ${MAX_KEY_CHARS});
  IF v_key IS NOT NULL THEN
    IF v_ordering_key IS NOT NULL THEN
      PERFORM ${s}.api_refuse('options.orderingKey', 'cannot be combined with idempotencyKey yet');
    END IF;
    SELECT r.id::bigint INTO v_id
    FROM ${fn('enqueue_keyed')}(queue, ARRAY[payload::text], ARRAY[v_priority], ARRAY[v_run_at],
      ARRAY[v_delay_ms], ARRAY[v_max_attempts], ${channel}, ARRAY[v_key], ARRAY[v_concurrency_key]) AS r;
    RETURN v_id;
  END IF;
  IF v_ordering_key IS NOT NULL THEN
    SELECT r.ids[1]::bigint INTO v_id
    FROM ${fn('enqueue_ordered')}(queue, ARRAY[payload::text], ARRAY[v_priority], ARRAY[v_run_at],
      ARRAY[v_delay_ms], ARRAY[v_max_attempts], ${channel}, ARRAY[v_ordering_key], ARRAY[v_concurrency_key]) AS r;
    RETURN v_id;
  END IF;
  SELECT r.id INTO v_id
  FROM ${fn('enqueue_one')}(queue, payload, v_priority, v_run_at, v_delay_ms, v_max_attempts, ${channel},
    v_concurrency_key) AS r;
  RETURN v_id;
END
${BODY}`,
    `FUNCTION ${s}.enqueue_many(queue text, payloads jsonb, options jsonb DEFAULT '{}'::jsonb) RETURNS bigint[]
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS ${BODY}
DECLARE
${JOB_VARIABLES}
  v_count integer;
  v_texts text[];
  v_total bigint;
  v_index bigint;
  v_bytes integer;
  v_ids text[];
BEGIN
${queueCheck(s)}
  IF payloads IS NULL OR pg_catalog.jsonb_typeof(payloads) <> 'array'
      OR pg_catalog.jsonb_array_length(payloads) NOT BETWEEN 1 AND ${MAX_ENQUEUE_MANY} THEN
    PERFORM ${s}.api_refuse('payloads', 'must be an array of 1 to ${MAX_ENQUEUE_MANY} jobs');
  END IF;
${optionsCheck(s, SQL_ENQUEUE_MANY_OPTIONS)}
${jobChecks(s)}
  SELECT t.n - 1, pg_catalog.octet_length(t.e::text) INTO v_index, v_bytes
  FROM pg_catalog.jsonb_array_elements(payloads) WITH ORDINALITY AS t(e, n)
  WHERE pg_catalog.octet_length(t.e::text) > ${DEFAULT_MAX_PAYLOAD_BYTES}
  ORDER BY t.n LIMIT 1;
  IF FOUND THEN
    PERFORM ${s}.api_refuse('payloads[' || v_index || ']',
      pg_catalog.format('is %s bytes as JSON, over the limit of %s', v_bytes, ${DEFAULT_MAX_PAYLOAD_BYTES}));
  END IF;
  SELECT t.n - 1 INTO v_index
  FROM pg_catalog.jsonb_array_elements(payloads) WITH ORDINALITY AS t(e, n)
  WHERE ${tooDeep('t.e')}
  ORDER BY t.n LIMIT 1;
  IF FOUND THEN
    PERFORM ${s}.api_refuse('payloads[' || v_index || ']', ${literal(TOO_DEEP)});
  END IF;
  SELECT pg_catalog.array_agg(t.e::text ORDER BY t.n), pg_catalog.sum(pg_catalog.octet_length(t.e::text)), pg_catalog.count(*)
  INTO v_texts, v_total, v_count
  FROM pg_catalog.jsonb_array_elements(payloads) WITH ORDINALITY AS t(e, n);
  IF v_total > ${MAX_ENQUEUE_MANY_BYTES} THEN
    PERFORM ${s}.api_refuse('payloads', pg_catalog.format(
      'hold %s bytes of payload JSON, over the limit of %s for one call; split the batch', v_total, ${MAX_ENQUEUE_MANY_BYTES}));
  END IF;
${jobValues(s)}
  IF v_ordering_key IS NOT NULL THEN
    SELECT r.ids INTO v_ids
    FROM ${fn('enqueue_ordered')}(queue, v_texts, pg_catalog.array_fill(v_priority, ARRAY[v_count]),
      pg_catalog.array_fill(v_run_at, ARRAY[v_count]), pg_catalog.array_fill(v_delay_ms, ARRAY[v_count]),
      pg_catalog.array_fill(v_max_attempts, ARRAY[v_count]), ${channel},
      pg_catalog.array_fill(v_ordering_key, ARRAY[v_count]), pg_catalog.array_fill(v_concurrency_key, ARRAY[v_count])) AS r;
  ELSE
    SELECT r.ids INTO v_ids
    FROM ${fn('enqueue_many')}(queue, v_texts, pg_catalog.array_fill(v_priority, ARRAY[v_count]),
      pg_catalog.array_fill(v_run_at, ARRAY[v_count]), pg_catalog.array_fill(v_delay_ms, ARRAY[v_count]),
      pg_catalog.array_fill(v_max_attempts, ARRAY[v_count]), ${channel},
      pg_catalog.array_fill(v_concurrency_key, ARRAY[v_count])) AS r;
  END IF;
  RETURN v_ids::bigint[];
END
${BODY}`,
    // The job's status as getJob reads it without its payload: pending, running, succeeded, dead or
    // cancelled; NULL for no such job (never created, rolled back, or pruned).
    `FUNCTION ${s}.job_status(id bigint) RETURNS text
  LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS ${BODY}SELECT j.status FROM (${JobGetByIdWithoutPayload(schema).text}) AS j${BODY}`,
  ];
  const digest = createHash('sha1').update(definitions.join('\n')).digest('hex').slice(0, 10);
  const comment = `leasehold:producer:sql_api ${digest}`;
  const signatures = [
    `${s}.enqueue(text, jsonb, jsonb)`,
    `${s}.enqueue_many(text, jsonb, jsonb)`,
    `${s}.job_status(bigint)`,
  ];
  return {
    comment,
    create: [
      ...definitions.map((definition) => `CREATE OR REPLACE ${definition}`),
      ...signatures.map((signature) => `COMMENT ON FUNCTION ${signature} IS ${literal(comment)}`),
    ],
  };
}

const TOO_DEEP = `is not JSON-serialisable here (nested more than ${MAX_JSON_DEPTH} levels deep)`;

// serialisePayload's depth bound: an array or object nested below MAX_JSON_DEPTH containers. Only
// text longer than twice the bound can nest that deep, so most payloads are not walked.
function tooDeep(value: string): string {
  return `(pg_catalog.octet_length(${value}::text) > ${2 * MAX_JSON_DEPTH} AND pg_catalog.jsonb_path_exists(${value},
    'strict $.**{${MAX_JSON_DEPTH} to last} ? (@.type() == "array" || @.type() == "object")'))`;
}

const JOB_VARIABLES = `  v_options jsonb := coalesce(options, '{}'::jsonb);
  v_run_at timestamptz;
  v_delay_ms double precision;
  v_priority integer;
  v_max_attempts integer;
  v_ordering_key text;
  v_concurrency_key text;
  v_id bigint;`;

// assertQueueName.
function queueCheck(s: string): string {
  return `  IF queue IS NULL OR queue !~ '^[A-Za-z0-9_.:-]{1,128}$' THEN
    PERFORM ${s}.api_refuse('queue', 'must be 1 to 128 characters of letters, digits and _ - . : (got '
      || ${s}.api_describe(pg_catalog.to_jsonb(queue)) || ')');
  END IF;`;
}

// optionsObject and rejectUnknownOptions.
function optionsCheck(s: string, known: readonly string[]): string {
  return `  IF pg_catalog.jsonb_typeof(v_options) <> 'object' THEN
    PERFORM ${s}.api_refuse('options', 'must be an object');
  END IF;
  PERFORM ${s}.api_reject_unknown(v_options, ${textArray(known)}, 'options');`;
}

// newJob's checks, in its order: the schedule (scheduleFromOptions), then (after the payload, which
// the caller checks) priority, attempts and the keys, in jobValues.
function jobChecks(s: string): string {
  return `  IF v_options ? 'runAt' AND v_options ? 'delayMs' THEN
    PERFORM ${s}.api_refuse('options', 'give runAt or delayMs, not both');
  END IF;
  v_run_at := ${s}.api_timestamp(v_options -> 'runAt', 'options.runAt');
  v_delay_ms := coalesce(${s}.api_int(v_options -> 'delayMs', 'options.delayMs', 0, ${MAX_ENQUEUE_DELAY_MS}), 0);`;
}

function jobValues(s: string): string {
  return `  v_priority := coalesce(${s}.api_int(v_options -> 'priority', 'options.priority', ${-PRIORITY_LIMIT}, ${PRIORITY_LIMIT}), ${DEFAULT_PRIORITY});
  v_max_attempts := coalesce(${s}.api_int(v_options -> 'maxAttempts', 'options.maxAttempts', 1, ${MAX_ATTEMPTS_LIMIT}), ${DEFAULT_MAX_ATTEMPTS});
  v_ordering_key := ${s}.api_text(v_options -> 'orderingKey', 'options.orderingKey', ${MAX_KEY_CHARS});
  v_concurrency_key := ${s}.api_text(v_options -> 'concurrencyKey', 'options.concurrencyKey', ${MAX_KEY_CHARS});`;
}
