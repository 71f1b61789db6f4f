import type { PruneOptions } from '../../context/client-options.js';
import type { LeaseholdContext } from '../../context/context.js';
import { type PruneResult, prunePass } from '../../maintenance/retention.js';
import { DEFAULT_PRUNE_BATCH, DEFAULT_PRUNE_LIMIT } from '../../shared/defaults.js';

export type { PruneResult } from '../../maintenance/retention.js';

import { rejectUnknownOptions } from '../../shared/unknown-options.js';
import { MAX_BATCH, optionalInt, optionsObject } from '../../shared/validation.js';

/** `lh.prune`: one retention pass now, in bounded batches on the pool (no lock: an operator's call). */
export async function prune(context: LeaseholdContext, given?: PruneOptions): Promise<PruneResult> {
  const options = optionsObject(given);
  rejectUnknownOptions(options, ['batchSize', 'limit'], 'options');
  return prunePass((batch) => batch(context.pool), context.schema, {
    succeededRetentionMs: context.succeededRetentionMs,
    batchSize: optionalInt(options.batchSize, 'batchSize', 1, MAX_BATCH, DEFAULT_PRUNE_BATCH),
    limit: optionalInt(options.limit, 'limit', 1, Number.MAX_SAFE_INTEGER, DEFAULT_PRUNE_LIMIT),
  });
}
