-- 023: the stable SQL API (issue 33). See docs/sql-api.md. The migrator runs this with search_path
-- set to the Leasehold schema.
--
-- Why: producers in other languages (Python, Go, Ruby, a database trigger) could only enqueue by
-- copying the library's internal calls, whose functions are named by a digest of their statement
-- (lh_enqueue_one_<digest>) and change name whenever the statement changes. The schema now has
-- three functions whose names and signatures never change:
--   enqueue(queue text, payload jsonb, options jsonb DEFAULT '{}') RETURNS bigint
--   enqueue_many(queue text, payloads jsonb, options jsonb DEFAULT '{}') RETURNS bigint[]
--   job_status(id bigint) RETURNS text
-- They run in the caller's transaction (a rolled-back enqueue leaves nothing; the wake-up is sent
-- on commit), check their arguments as lh.enqueue does, and are executable by <schema>_producer.
--
-- Their bodies are not here: the migrator writes them at every migrate() from this version's own
-- statements (src/storage/sql-api.ts: CREATE OR REPLACE, same name and signature, the body calling
-- this version's statement functions and checking this version's limits and option names). A later
-- version that changes a statement replaces the body and keeps the name. This migration holds what
-- the bodies share: how a refusal is raised (SQLSTATE 22023, "leasehold: <field>: <what>", as the
-- TypeScript API's ValidationError message reads) and the checks of one value each.
--
-- Only the functions' owner calls these helpers (from inside the SECURITY DEFINER bodies): EXECUTE
-- is revoked from PUBLIC. None of them reads or writes a table; they call one another by name, so
-- each keeps the migration's search_path (the schema, which only its owner may write).

-- Refuses a call: SQLSTATE 22023 (invalid_parameter_value), nothing written.
CREATE FUNCTION api_refuse(field text, message text) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
  RAISE EXCEPTION 'leasehold: %: %', field, message
    USING ERRCODE = 'invalid_parameter_value', HINT = 'See docs/sql-api.md for the options enqueue takes.';
END
$$;

-- A string's length in UTF-16 code units, as JavaScript's `length` counts it (the API's limits).
CREATE FUNCTION api_utf16_length(value text) RETURNS integer
LANGUAGE sql IMMUTABLE
SET search_path FROM CURRENT
AS $$
  SELECT char_length(value) + char_length(regexp_replace(value, '[^\U00010000-\U0010FFFF]', '', 'g'))
$$;

-- A value as a refusal names it ("got ..."): what validation.ts's describe() prints for the same
-- JSON value (strings quoted and cut at 40 characters; arrays and objects as "object"; an absent
-- option as "undefined").
CREATE FUNCTION api_describe(value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path FROM CURRENT
AS $$
  SELECT CASE
    WHEN value IS NULL THEN 'undefined'
    WHEN jsonb_typeof(value) = 'string' THEN to_jsonb(CASE
      WHEN char_length(value #>> '{}') > 40 THEN left(value #>> '{}', 40) || '…'
      ELSE value #>> '{}' END)::text
    WHEN jsonb_typeof(value) = 'number' THEN trim_scale((value #>> '{}')::numeric)::text
    WHEN jsonb_typeof(value) = 'boolean' THEN value #>> '{}'
    WHEN jsonb_typeof(value) = 'null' THEN 'null'
    ELSE 'object'
  END
$$;

-- Edit distance counting insertions, deletions, substitutions and swaps of neighbours, giving up at
-- cap: unknown-options.ts's editDistance.
CREATE FUNCTION api_edit_distance(a text, b text, cap integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT
AS $$
DECLARE
  la integer := char_length(a);
  lb integer := char_length(b);
  d integer[];
  w integer := lb + 1;
  i integer;
  j integer;
  cost integer;
  v integer;
BEGIN
  IF abs(la - lb) >= cap THEN RETURN cap; END IF;
  d := array_fill(0, ARRAY[(la + 1) * w]);
  FOR i IN 0..la LOOP d[i * w + 1] := i; END LOOP;
  FOR j IN 0..lb LOOP d[j + 1] := j; END LOOP;
  FOR i IN 1..la LOOP
    FOR j IN 1..lb LOOP
      cost := CASE WHEN substr(a, i, 1) = substr(b, j, 1) THEN 0 ELSE 1 END;
      v := least(d[(i - 1) * w + j + 1] + 1, d[i * w + j] + 1, d[(i - 1) * w + j] + cost);
      IF i > 1 AND j > 1 AND substr(a, i, 1) = substr(b, j - 1, 1) AND substr(a, i - 1, 1) = substr(b, j, 1) THEN
        v := least(v, d[(i - 2) * w + j - 1] + 1);
      END IF;
      d[i * w + j + 1] := v;
    END LOOP;
  END LOOP;
  RETURN least(d[la * w + lb + 1], cap);
END
$$;

-- The known option nearest to `given`, when near enough to be a typo: unknown-options.ts's
-- closestOption (one edit for names up to four characters, two up to eight, three beyond; a
-- misspelt start of a longer name counts one edit more).
CREATE FUNCTION api_closest_option(given text, known text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT
AS $$
DECLARE
  name text := lower(given);
  allowed integer := CASE WHEN char_length(given) <= 4 THEN 1 WHEN char_length(given) <= 8 THEN 2 ELSE 3 END;
  candidate text;
  lowered text;
  distance integer;
  best text;
  best_distance integer;
  stop integer;
BEGIN
  FOREACH candidate IN ARRAY known LOOP
    lowered := lower(candidate);
    distance := api_edit_distance(name, lowered, allowed + 1);
    IF char_length(name) >= 6 AND char_length(lowered) > char_length(name) + 1 THEN
      FOREACH stop IN ARRAY ARRAY[char_length(name), char_length(name) + 1] LOOP
        distance := least(distance, api_edit_distance(name, left(lowered, stop), allowed + 1) + 1);
      END LOOP;
    END IF;
    IF distance <= allowed AND (best IS NULL OR distance < best_distance
        OR (distance = best_distance AND candidate COLLATE "C" < best COLLATE "C")) THEN
      best := candidate;
      best_distance := distance;
    END IF;
  END LOOP;
  RETURN best;
END
$$;

-- Refuses the first key of `options` that is not in `known`: rejectUnknownOptions.
CREATE FUNCTION api_reject_unknown(options jsonb, known text[], field text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT
AS $$
DECLARE
  key text;
  suggestion text;
BEGIN
  FOR key IN SELECT jsonb_object_keys(options) LOOP
    CONTINUE WHEN key = ANY (known);
    suggestion := api_closest_option(key, known);
    PERFORM api_refuse(field || '.' || key, 'is not an option'
      || coalesce(' (did you mean ' || suggestion || '?)', '') || '; known: ' || array_to_string(known, ', '));
  END LOOP;
END
$$;

-- An optional integer option within [min, max]: assertInt. NULL when absent; a JSON null is refused.
CREATE FUNCTION api_int(value jsonb, field text, min numeric, max numeric) RETURNS numeric
LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT
AS $$
BEGIN
  IF value IS NULL THEN RETURN NULL; END IF;
  IF jsonb_typeof(value) <> 'number' OR (value #>> '{}')::numeric <> trunc((value #>> '{}')::numeric)
      OR (value #>> '{}')::numeric NOT BETWEEN min AND max THEN
    PERFORM api_refuse(field, format('must be an integer from %s to %s (got %s)', min, max, api_describe(value)));
  END IF;
  RETURN (value #>> '{}')::numeric;
END
$$;

-- An optional text option of 1 to `max` characters, not only white space: assertText. NULL when
-- absent; a JSON null is refused.
CREATE FUNCTION api_text(value jsonb, field text, max integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path FROM CURRENT
AS $$
BEGIN
  IF value IS NULL THEN RETURN NULL; END IF;
  IF jsonb_typeof(value) <> 'string'
      OR (value #>> '{}') ~ '^[\s\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*$'
      OR api_utf16_length(value #>> '{}') > max THEN
    PERFORM api_refuse(field, format('must be a non-empty string of at most %s characters', max));
  END IF;
  RETURN value #>> '{}';
END
$$;

-- An optional run time: a JSON string PostgreSQL reads as a finite timestamptz (ISO 8601, with
-- its zone). NULL when absent. The TypeScript API takes a Date here; JSON has none.
CREATE FUNCTION api_timestamp(value jsonb, field text) RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path FROM CURRENT
AS $$
DECLARE
  at timestamptz;
BEGIN
  IF value IS NULL THEN RETURN NULL; END IF;
  IF jsonb_typeof(value) = 'string' THEN
    BEGIN
      at := (value #>> '{}')::timestamptz;
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow OR invalid_parameter_value THEN
      at := NULL;
    END;
  END IF;
  IF at IS NULL OR NOT isfinite(at) THEN
    PERFORM api_refuse(field, 'must be a valid timestamp: ISO 8601 text with its zone, e.g. "2030-01-01T09:00:00Z"');
  END IF;
  RETURN at;
END
$$;

REVOKE ALL ON FUNCTION api_refuse(text, text), api_utf16_length(text), api_describe(jsonb),
  api_edit_distance(text, text, integer), api_closest_option(text, text[]),
  api_reject_unknown(jsonb, text[], text), api_int(jsonb, text, numeric, numeric),
  api_text(jsonb, text, integer), api_timestamp(jsonb, text) FROM PUBLIC;
