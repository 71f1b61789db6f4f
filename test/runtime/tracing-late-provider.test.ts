import * as otel from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { migratedClient, waitFor } from '../support/db.js';
import { installRecordingTracer } from '../support/otel-recorder.js';
import { started } from '../support/worker.js';

// With @opentelemetry/api installed but no SDK registered, a handler runs without a span (the
// worker skips the no-op span and its context); the check is made per job, so an SDK registered
// while the worker runs traces the jobs that start after it.
describe('tracing without an SDK, then with one', () => {
  it('runs handlers without a span until a tracer provider is registered, and traces the jobs after it', async () => {
    const lh = await migratedClient();
    const activeSpans: (otel.Span | undefined)[] = [];
    const worker = lh.worker({
      queues: {
        'late-provider': async () => {
          activeSpans.push(otel.trace.getActiveSpan());
        },
      },
      pollIntervalMs: 20,
    });
    await started(worker);
    const first = await lh.enqueue('late-provider', {});
    await waitFor(async () => (await lh.getJob(first.id))?.status === 'succeeded');
    expect(activeSpans).toEqual([undefined]);

    const { spans, uninstall } = installRecordingTracer();
    try {
      const second = await lh.enqueue('late-provider', {});
      await waitFor(async () => (await lh.getJob(second.id))?.status === 'succeeded');
      expect(activeSpans).toHaveLength(2);
      expect(activeSpans[1]).toBeDefined();
      const processed = spans.filter((s) => s.name === 'leasehold.process');
      expect(processed.map((s) => s.attributes['messaging.message.id'])).toEqual([second.id]);
      expect(activeSpans[1]?.spanContext().spanId).toBe(processed[0]?.spanId);
    } finally {
      uninstall();
    }
  });
});
