// A log of lease renewals, for the many-hosts harness's latency phase (chaos/hosts.mjs). Leasehold
// counts a claim's renewals on its row (lease_extensions) and logs none of them, so the count alone
// cannot say how close to its expiry each one landed. This trigger, in the harness's own schema,
// records every renewal as the database applied it: when (the renewing statement's database time,
// the same now() the new expiry is measured from), and the expiry it replaced. The lease left at
// that moment (old expiry minus now) is the margin the renewal schedule kept after the round trip.
// Installed only around the latency phase; it changes nothing a worker sees.

/** Creates chaos.renewals and the trigger that fills it. */
export async function startRenewalLog(db) {
  await db.query(`
    CREATE TABLE IF NOT EXISTS chaos.renewals (
      job_id bigint NOT NULL, token bigint NOT NULL, owner text NOT NULL, queue text NOT NULL,
      at timestamptz NOT NULL, old_expires_at timestamptz NOT NULL, new_expires_at timestamptz NOT NULL
    );
    CREATE OR REPLACE FUNCTION chaos.log_renewal() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      INSERT INTO chaos.renewals (job_id, token, owner, queue, at, old_expires_at, new_expires_at)
      VALUES (NEW.id, NEW.lease_token, NEW.lease_owner, NEW.queue_name, now(), OLD.lease_expires_at,
              NEW.lease_expires_at);
      RETURN NULL;
    END
    $fn$;
    -- A renewal is the one update that bumps lease_extensions without changing the claim.
    CREATE TRIGGER chaos_log_renewal AFTER UPDATE ON leasehold.jobs FOR EACH ROW
      WHEN (NEW.lease_extensions > OLD.lease_extensions AND NEW.lease_token = OLD.lease_token)
      EXECUTE FUNCTION chaos.log_renewal();`);
}

/** Removes the trigger (the log stays, for the measures). */
export async function stopRenewalLog(db) {
  await db.query('DROP TRIGGER IF EXISTS chaos_log_renewal ON leasehold.jobs');
}
