import { describe, expect, it } from 'vitest';
import { type Logger, PermanentError, RetryableError, ValidationError } from '../../src/index.js';
import { migratedClient, waitFor } from '../support/db.js';
import { started } from '../support/worker.js';

interface Line {
  level: string;
  obj: Record<string, unknown>;
  msg: string | undefined;
}

function memoryLogger(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg?: string) =>
    lines.push({ level, obj, msg });
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

describe('worker logger option', () => {
  it('logs outcomes as structured lines with queue, job id and error code, never the payload', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    const secret = 'card-4111-1111-1111-1111';
    const { ids } = await lh.enqueueMany('logged', [
      { payload: { kind: 'ok', secret } },
      { payload: { kind: 'flaky', secret } },
      { payload: { kind: 'doomed', secret } },
    ]);
    const { logger, lines } = memoryLogger();
    const worker = lh.worker({
      logger,
      recoveryIntervalMs: 0,
      queues: {
        logged: async (job) => {
          const { kind } = job.payload as { kind: string };
          if (kind === 'flaky' && job.attempt === 1)
            throw new RetryableError(`failed for ${secret}`, { code: 'FLAKY' });
          if (kind === 'doomed') throw new PermanentError('never', { code: 'DOOMED' });
        },
      },
    });
    await started(worker);
    await waitFor(() => worker.counters.completed === 2 && worker.counters.dead === 1, { what: 'outcomes' });
    await worker.stop();

    const byOutcome = (outcome: string) => lines.filter((l) => l.obj.outcome === outcome);
    expect(byOutcome('completed').map((l) => l.level)).toEqual(['debug', 'debug']);
    expect(byOutcome('retry')).toEqual([
      {
        level: 'info',
        msg: 'leasehold: job failed, will retry',
        obj: expect.objectContaining({ queue: 'logged', jobId: ids[1], attempt: 1, errorCode: 'FLAKY' }),
      },
    ]);
    expect(byOutcome('dead')).toEqual([
      {
        level: 'warn',
        msg: 'leasehold: job dead',
        obj: expect.objectContaining({ queue: 'logged', jobId: ids[2], errorCode: 'DOOMED' }),
      },
    ]);
    expect(JSON.stringify(lines)).not.toContain(secret);
  });

  it('rejects a logger without the four methods', async () => {
    const lh = await migratedClient();
    expect(() => lh.worker({ logger: { info() {} } as never, queues: { q: async () => {} } })).toThrow(
      ValidationError,
    );
  });
});
