/**
 * A job's idempotency key (`job.idempotencyKey`, and through it every effect key): stable across
 * the job's attempts, and never the key of another job.
 *
 * `schema:id:uid`, where uid is the job's identity (jobs.job_uid, migration 027: a random UUID drawn
 * at insert). The id alone is not enough: after an asynchronous failover the promoted server's id
 * sequence can be behind the lost primary's, and a new job can then receive the id of an
 * acknowledged job that was lost; the id is kept in the key for people reading it. A job enqueued
 * before 027 has no identity and keeps the key it always had, `schema:id`, so that its side effects
 * already recorded downstream under that key are still recognised.
 */
export function idempotencyKeyOf(schema: string, id: string, uid: string | null | undefined): string {
  return uid ? `${schema}:${id}:${uid}` : `${schema}:${id}`;
}
