import type pg from 'pg';
import { connectionFor, type LeaseholdContext } from '../../context/context.js';
import {
  EVENT_RETENTION_MS,
  eventKey,
  eventName,
  eventPayloadText,
} from '../../runtime/durable/wait-event.js';
import { toDatabaseError, ValidationError } from '../../shared/errors.js';
import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import type { Queryable } from '../../storage/db.js';
import { sendEventRows } from '../../storage/flows/events.js';

/** What `sendEvent` sends: the key waits match on, and a JSON payload (at most 1 MiB). */
export interface SendEventInput {
  key: string;
  payload?: unknown;
}

/** What `sendEvent` did: the event's id and how many waiting jobs it woke. */
export interface SendEventResult {
  id: string;
  woken: number;
}

/**
 * Sends event `name` (see `job.waitForEvent`): in `client`'s transaction when given (a rollback
 * sends nothing and wakes nothing), else in a short transaction of its own on the pool.
 */
export async function sendEvent(
  context: LeaseholdContext,
  name: string,
  input: SendEventInput,
  options: { client?: Queryable } = {},
): Promise<SendEventResult> {
  if (typeof input !== 'object' || input === null) {
    throw new ValidationError('sendEvent', 'give sendEvent(name, { key, payload })');
  }
  rejectUnknownOptions(input, ['key', 'payload'], 'sendEvent');
  rejectUnknownOptions(options ?? {}, ['client'], 'sendEvent options');
  const event = {
    name: eventName(name),
    key: eventKey(input.key),
    payloadJson: eventPayloadText(input.payload),
    retentionMs: EVENT_RETENTION_MS,
  };
  if (options?.client !== undefined) {
    return sendEventRows(connectionFor(context, options.client), context.schema, event);
  }
  // The sender's lock is held until its transaction ends: on the pool, a transaction of its own.
  // Every failure, the connect and BEGIN/COMMIT included, comes out typed, as the other calls' do.
  let client: pg.PoolClient | undefined;
  let broken: Error | undefined;
  try {
    client = await context.pool.connect();
    await client.query('BEGIN');
    try {
      const sent = await sendEventRows(connectionFor(context, client), context.schema, event);
      await client.query('COMMIT');
      return sent;
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
        broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
      });
      throw err;
    }
  } catch (err) {
    throw toDatabaseError(err, 'event_send', 'sendEvent');
  } finally {
    client?.release(broken);
  }
}
