import type { LeaseholdContext } from '../../context/context.js';
import { type MigrateResult, migrate as migrateSchema } from '../../migrations/migrator.js';

export type { MigrateResult } from '../../migrations/migrator.js';

/** `lh.migrate`: creates or upgrades the context's schema (safe from many processes at once). */
export function migrate(context: LeaseholdContext): Promise<MigrateResult> {
  return migrateSchema(context.pool, context.schema);
}
