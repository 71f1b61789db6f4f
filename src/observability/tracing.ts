import type { Queryable } from '../storage/db.js';
import { attachTraceparent, readTraceparents } from '../storage/jobs/traces.js';

// OpenTelemetry is optional: its API is imported at run time when installed. Only its type is
// named here, and no exported signature mentions it, so users without it need nothing.
type OtelApi = typeof import('@opentelemetry/api');
type Span = import('@opentelemetry/api').Span;

/** The name spans are created under (the instrumentation scope). */
export const TRACER_NAME = 'leasehold';

let loading: Promise<OtelApi | null> | null = null;
let loaded: OtelApi | null = null;

/** Imports `@opentelemetry/api` once; null when it is not installed. */
export function loadOtel(): Promise<OtelApi | null> {
  loading ??= import('@opentelemetry/api').then(
    (api) => {
      loaded = api;
      return api;
    },
    () => null,
  );
  return loading;
}

let noopProvider: unknown;

/**
 * True while no OpenTelemetry SDK is registered: the global tracer provider is still the API's
 * proxy with its no-op delegate, so every span would be a non-recording one and nothing would
 * read the context a span is put in. Checked per call (an SDK may be registered later); it spares
 * a no-op job the span, its attributes and the context it would run in.
 */
function tracingInactive(otel: OtelApi): boolean {
  const provider = otel.trace.getTracerProvider();
  if (!(provider instanceof otel.ProxyTracerProvider)) return false;
  noopProvider ??= new otel.ProxyTracerProvider().getDelegate();
  return provider.getDelegate() === noopProvider;
}

/** W3C traceparent of a recording span with a valid context, or null. */
function traceparentOf(otel: OtelApi, span: Span): string | null {
  if (!span.isRecording()) return null;
  const ctx = span.spanContext();
  if (!otel.isSpanContextValid(ctx)) return null;
  return `00-${ctx.traceId}-${ctx.spanId}-${(ctx.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * Wraps an enqueue in a `leasehold.enqueue` producer span (a child of the caller's active span)
 * and, when the span is recorded, stores its traceparent on the jobs created, in the same
 * transaction when the enqueue joined one: the handler's span continues this trace.
 */
export async function traceEnqueue<T>(
  target: { db: Queryable; schema: string; queue: string; count: number },
  enqueue: () => Promise<T>,
  createdIds: (result: T) => readonly string[],
): Promise<T> {
  const otel = loaded ?? (await loadOtel());
  if (!otel || tracingInactive(otel)) return enqueue();
  const span = otel.trace.getTracer(TRACER_NAME).startSpan('leasehold.enqueue', {
    kind: otel.SpanKind.PRODUCER,
    attributes: {
      'messaging.system': 'leasehold',
      'messaging.operation.type': 'send',
      'messaging.destination.name': target.queue,
      'messaging.batch.message_count': target.count,
    },
  });
  try {
    const result = await otel.context.with(otel.trace.setSpan(otel.context.active(), span), enqueue);
    const traceparent = traceparentOf(otel, span);
    const ids = traceparent ? createdIds(result) : [];
    if (traceparent && ids.length > 0) await attachTraceparent(target.db, target.schema, ids, traceparent);
    return result;
  } catch (err) {
    span.setStatus({ code: otel.SpanStatusCode.ERROR, message: errorCode(err) });
    throw err;
  } finally {
    span.end();
  }
}

/**
 * Wraps a claim in a `leasehold.claim` span and, when it is recorded, reads the claimed jobs'
 * traceparents (one extra statement per claim batch, only while tracing).
 */
export async function traceClaim<R extends { id: string }>(
  target: { db: Queryable; schema: string; queue: string },
  claim: () => Promise<R[]>,
): Promise<{ rows: R[]; traceparents: Map<string, string> | null }> {
  const otel = loaded;
  if (!otel || tracingInactive(otel)) return { rows: await claim(), traceparents: null };
  const span = otel.trace.getTracer(TRACER_NAME).startSpan('leasehold.claim', {
    kind: otel.SpanKind.CLIENT,
    attributes: { 'messaging.system': 'leasehold', 'messaging.destination.name': target.queue },
  });
  try {
    const rows = await claim();
    span.setAttribute('messaging.batch.message_count', rows.length);
    const traceparents =
      span.isRecording() && rows.length > 0
        ? await readTraceparents(
            target.db,
            target.schema,
            rows.map((row) => row.id),
          )
        : null;
    return { rows, traceparents };
  } catch (err) {
    span.setStatus({ code: otel.SpanStatusCode.ERROR, message: errorCode(err) });
    throw err;
  } finally {
    span.end();
  }
}

/**
 * Runs a handler inside a `leasehold.process` consumer span whose parent is the enqueue's span
 * (from `traceparent`), so the handler's own spans join the producer's trace. Without
 * OpenTelemetry, runs it as is. Resolves to the handler's value (the job's result).
 */
export function traceHandler<J extends { id: string; queue: string; attempt: number }>(
  job: J,
  traceparent: string | undefined,
  handler: (job: J) => Promise<unknown> | unknown,
): Promise<unknown> | unknown {
  const otel = loaded;
  // A traceparent from the enqueue is still handed on without an SDK here (a no-op span carries it).
  // Without either, the handler is called as is: no span, no context, no closure, no extra promise.
  if (!otel || (traceparent === undefined && tracingInactive(otel))) return handler(job);
  return handlerInSpan(otel, job, traceparent, handler);
}

async function handlerInSpan<J extends { id: string; queue: string; attempt: number }>(
  otel: OtelApi,
  job: J,
  traceparent: string | undefined,
  handler: (job: J) => Promise<unknown> | unknown,
): Promise<unknown> {
  let parent = otel.context.active();
  const match = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (match) {
    parent = otel.trace.setSpanContext(parent, {
      traceId: match[1] as string,
      spanId: match[2] as string,
      traceFlags: Number.parseInt(match[3] as string, 16),
      isRemote: true,
    });
  }
  const span = otel.trace.getTracer(TRACER_NAME).startSpan(
    'leasehold.process',
    {
      kind: otel.SpanKind.CONSUMER,
      attributes: {
        'messaging.system': 'leasehold',
        'messaging.operation.type': 'process',
        'messaging.destination.name': job.queue,
        'messaging.message.id': job.id,
        'leasehold.attempt': job.attempt,
      },
    },
    parent,
  );
  try {
    return await otel.context.with(otel.trace.setSpan(parent, span), () => handler(job));
  } catch (err) {
    // The error's code only: its message may quote the payload.
    span.setStatus({ code: otel.SpanStatusCode.ERROR, message: errorCode(err) });
    throw err;
  } finally {
    span.end();
  }
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code.slice(0, 64) : err instanceof Error ? err.name : 'error';
}
