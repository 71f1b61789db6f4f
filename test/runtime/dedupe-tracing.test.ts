import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedClient, testPool } from '../support/db.js';
import { installRecordingTracer, type SpanRecord } from '../support/otel-recorder.js';

let spans: SpanRecord[] = [];
let uninstall: () => void;

beforeAll(() => {
  ({ spans, uninstall } = installRecordingTracer());
});

afterAll(() => uninstall());

describe('dedupe and OpenTelemetry', () => {
  it('a job keeps the trace of the enqueue that created it: folded enqueues do not overwrite it', async () => {
    const lh = await migratedClient();
    const pool = testPool(1);
    const traceparent = async (id: string) =>
      (await pool.query(`SELECT traceparent FROM "${lh.schema}".jobs WHERE id = $1`, [id])).rows[0]
        .traceparent;
    const enqueueSpans = () => spans.filter((s) => s.name === 'leasehold.enqueue');

    const dedupe = { key: 'k', mode: 'debounce', windowMs: 60_000 } as const;
    const { id } = await lh.enqueue('traced', { v: 1 }, { dedupe });
    const creator = enqueueSpans().at(-1);
    const expected = `00-${creator?.traceId}-${creator?.spanId}-01`;
    expect(await traceparent(id)).toBe(expected);
    expect(await lh.enqueue('traced', { v: 2 }, { dedupe })).toEqual({ id, created: false });
    expect(enqueueSpans()).toHaveLength(2);
    expect(await traceparent(id)).toBe(expected);

    const batch = await lh.enqueueMany('traced', [
      { payload: 3, dedupe },
      { payload: 4, dedupe: { key: 'fresh', mode: 'replace' } },
      { payload: 5, dedupe: { key: 'fresh', mode: 'replace' } },
    ]);
    const batchSpan = enqueueSpans().at(-1);
    expect(batch.ids[0]).toBe(id);
    expect(await traceparent(id)).toBe(expected);
    expect(await traceparent(batch.ids[2] as string)).toBe(
      `00-${batchSpan?.traceId}-${batchSpan?.spanId}-01`,
    );
  });
});
