import type { LeaseholdContext } from '../../context/context.js';
import { type RefusalCount, readRefusals } from '../../storage/jobs/read.js';

export type { RefusalCount } from '../../storage/jobs/read.js';

/** `lh.leaseRefusals`: the lost-fence attempts counted so far, per queue and operation. */
export function leaseRefusals(context: LeaseholdContext): Promise<RefusalCount[]> {
  return readRefusals(context.pool, context.schema);
}
