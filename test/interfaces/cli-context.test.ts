import { afterEach, describe, expect, it, vi } from 'vitest';
import { type AdminFlags, runAdminCommand } from '../../src/cli/admin.js';
import { CliError } from '../../src/cli/errors.js';
import { closeContext, type LeaseholdContext, resolveContext } from '../../src/context/context.js';
import { enqueue } from '../../src/operations/producer/enqueue.js';
import { claim, complete } from '../../src/operations/worker/leases.js';
import { runCliInProcess } from '../support/cli-inprocess.js';
import { dropSchema, migratedClient, testPool, uniqueSchema } from '../support/db.js';

// The seam of issue 12 for the command line: its commands run on a resolved context and call the
// operation functions, so a program handed a context works without a Leasehold client or a URL.

afterEach(() => vi.restoreAllMocks());

describe('the CLI on a context', () => {
  it('admin commands run on the context they are handed, not on the flags, and leave its pool open', async () => {
    const { schema } = await migratedClient(); // creates (and later drops) the schema
    const pool = testPool(2);
    const context = resolveContext({ pool, schema });
    const opened: AdminFlags[] = [];
    const openContext = (flags: AdminFlags): LeaseholdContext => {
      opened.push(flags);
      return context;
    };
    // A URL that names no server: were it used, every command below would fail to connect.
    const nowhere = ['--database-url', 'postgres://nobody@nowhere.invalid:1/none'];
    const cli = (args: string[]) => runCliInProcess([...args, ...nowhere], { openContext });
    try {
      const { id } = await enqueue(context, 'ctx-emails', { to: 'a' });
      await enqueue(context, 'ctx-emails', { to: 'b' });
      const [lease] = await claim(context, { queue: 'ctx-emails', owner: 'w1' });

      expect(await cli(['pause', 'ctx-emails'])).toMatchObject({
        code: 0,
        stdout: 'queue ctx-emails paused: no new claims until `leasehold resume ctx-emails`\n',
      });
      const queues = await cli(['queues', '--json']);
      expect(queues.code).toBe(0);
      expect(JSON.parse(queues.stdout)).toEqual([
        expect.objectContaining({ name: 'ctx-emails', pending: 1, running: 1, paused: true }),
      ]);
      const cancelled = await cli(['cancel', lease!.jobId, '--reason', 'from a context', '--json']);
      expect(JSON.parse(cancelled.stdout)).toEqual({ id: lease!.jobId, previousStatus: 'running' });
      const shown = JSON.parse((await cli(['jobs', 'show', id, '--json'])).stdout);
      expect(shown).toMatchObject({ id, status: 'cancelled' });
      expect(shown.history.map((event: { kind: string }) => event.kind)).toContain('cancelled');
      expect(await cli(['check', '--max-dead', '0'])).toMatchObject({ code: 0, stdout: 'ok\n' });
      // A flag that sets a client option (prune's retention) applies to a context handed in too.
      await enqueue(context, 'ctx-done', {});
      const [done] = await claim(context, { queue: 'ctx-done', owner: 'w2' });
      expect(await complete(context, done!)).toBe(true);
      const pruned = await cli(['prune', '--succeeded-retention', '0', '--json']);
      expect(JSON.parse(pruned.stdout)).toMatchObject({ succeeded: 1 });

      // Each command asked for its context with its own flags, and closing it left our pool open.
      expect(opened).toHaveLength(6);
      expect(opened[0]).toMatchObject({ databaseUrl: nowhere[1] });
      const { rows } = await pool.query('SELECT 1 AS one');
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await closeContext(context);
    }
  });

  it('runAdminCommand takes a context and reads a missing schema as an operator would', async () => {
    const schema = uniqueSchema('lh_cli_ctx');
    const pool = testPool(1);
    const context = resolveContext({ pool, schema });
    const use = vi.fn(async () => 'ran');
    try {
      const refused = await runAdminCommand(context, use).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(CliError);
      expect((refused as Error).message).toBe(
        `schema ${schema} is not migrated (it holds no Leasehold tables): run \`leasehold migrate --schema ${schema}\` ` +
          'against this database, or pass the --schema (or LEASEHOLD_SCHEMA) your application uses',
      );
      expect(use).not.toHaveBeenCalled();
    } finally {
      await closeContext(context);
      await dropSchema(schema);
    }
  });
});
