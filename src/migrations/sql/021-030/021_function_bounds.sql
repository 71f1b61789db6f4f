-- 021: the argument bounds of the SECURITY DEFINER functions (issue 32). See docs/security.md,
-- "Database roles". The migrator runs this with search_path set to the Leasehold schema.
--
-- Why: the producer and worker roles write only through the schema's functions (016), whose
-- bodies are the library's statements. Those statements trust their parameters as the library's
-- TypeScript checked them (a claim of at most 1,000 jobs, a lease of at most a day, an error
-- message of at most 1,000 characters); a leaked credential calling a function directly passed
-- anything (a whole queue claimed under a 10^9-second lease). Each function now starts with one
-- check per bounded argument (generated from src/storage/functions.ts, beside the statement, whose
-- text is unchanged), and a check that fails calls this function: the call is refused with
-- SQLSTATE 22023 (invalid_parameter_value) before the statement runs, so nothing changes.
--
-- Only the functions' owner calls it (from inside their bodies): EXECUTE is revoked from PUBLIC.
CREATE FUNCTION refuse_argument(ok boolean, message text) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION 'leasehold: %', message
      USING ERRCODE = 'invalid_parameter_value',
            HINT = 'The library checks the same bound before calling; a direct call must too.';
  END IF;
END
$$;

REVOKE ALL ON FUNCTION refuse_argument(boolean, text) FROM PUBLIC;
