import * as otel from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedClient, testPool, waitFor } from '../support/db.js';
import { installRecordingTracer, type SpanRecord } from '../support/otel-recorder.js';
import { started } from '../support/worker.js';

// A minimal recording SDK (test/support/otel-recorder.ts): every span the library and the test
// start is kept in memory.
let spans: SpanRecord[] = [];
let tracer: otel.Tracer;
let uninstall: () => void;

beforeAll(() => {
  ({ spans, tracer, uninstall } = installRecordingTracer());
});

afterAll(() => uninstall());

describe('OpenTelemetry spans', () => {
  it('carries the trace from enqueue to the handler: enqueue, claim and process spans, no payload', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const request = tracer.startSpan('POST /signup');
    const { id } = await otel.context.with(otel.trace.setSpan(otel.context.active(), request), () =>
      lh.enqueue('traced', { email: 'secret@example.com' }),
    );
    request.end();
    const { rows } = await pool.query(`SELECT traceparent FROM "${lh.schema}".jobs WHERE id = $1`, [id]);
    const enqueue = spans.find((s) => s.name === 'leasehold.enqueue');
    expect(enqueue).toMatchObject({
      kind: otel.SpanKind.PRODUCER,
      traceId: request.spanContext().traceId,
      parentSpanId: request.spanContext().spanId,
      attributes: { 'messaging.destination.name': 'traced', 'messaging.batch.message_count': 1 },
      ended: true,
    });
    expect(rows[0].traceparent).toBe(`00-${enqueue?.traceId}-${enqueue?.spanId}-01`);

    let innerTrace: otel.SpanContext | undefined;
    const worker = lh.worker({
      queues: {
        traced: async () => {
          // The handler's own spans join the producer's trace.
          const inner = tracer.startSpan('send welcome email');
          innerTrace = inner.spanContext();
          inner.end();
        },
      },
    });
    await started(worker);
    await waitFor(() => worker.counters.completed === 1, { what: 'the traced job' });
    await worker.stop();

    const processSpan = spans.find((s) => s.name === 'leasehold.process');
    expect(processSpan).toMatchObject({
      kind: otel.SpanKind.CONSUMER,
      traceId: enqueue?.traceId,
      parentSpanId: enqueue?.spanId,
      attributes: {
        'messaging.destination.name': 'traced',
        'messaging.message.id': id,
        'leasehold.attempt': 1,
      },
      ended: true,
    });
    expect(innerTrace?.traceId).toBe(enqueue?.traceId);
    expect(spans.find((s) => s.name === 'send welcome email')?.parentSpanId).toBe(processSpan?.spanId);
    expect(
      spans.some((s) => s.name === 'leasehold.claim' && s.attributes['messaging.batch.message_count'] === 1),
    ).toBe(true);
    expect(JSON.stringify(spans)).not.toContain('secret@example.com');
  });

  it('marks a failed handler span with the error code only', async () => {
    const lh = await migratedClient({ backoff: { baseMs: 0, maxMs: 0 } });
    await lh.enqueue('traced-fail', { card: '4111' }, { maxAttempts: 1 });
    const worker = lh.worker({
      queues: {
        'traced-fail': async () => {
          throw Object.assign(new Error('card 4111 declined'), { code: 'DECLINED' });
        },
      },
    });
    await started(worker);
    await waitFor(() => worker.counters.dead === 1, { what: 'the failed job' });
    await worker.stop();
    const failed = spans.filter(
      (s) => s.name === 'leasehold.process' && s.attributes['messaging.destination.name'] === 'traced-fail',
    );
    expect(failed).toHaveLength(1);
    expect(failed[0]?.status).toEqual({ code: otel.SpanStatusCode.ERROR, message: 'DECLINED' });
  });
});
