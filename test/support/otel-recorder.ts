import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import * as otel from '@opentelemetry/api';

/** Everything a span was given: to check that none of it holds what it should not. */
export interface SpanRecord {
  name: string;
  kind: otel.SpanKind;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  attributes: otel.Attributes;
  status: otel.SpanStatus;
  events: unknown[];
  ended: boolean;
}

// A minimal recording SDK (the real SDK is not a dependency of Leasehold): an AsyncLocalStorage
// context manager and a tracer that keeps every span, event and exception in memory.
class RecordingSpan implements otel.Span {
  constructor(
    private readonly record: SpanRecord,
    private readonly ctx: otel.SpanContext,
  ) {}
  spanContext(): otel.SpanContext {
    return this.ctx;
  }
  setAttribute(key: string, value: otel.SpanAttributeValue): this {
    this.record.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: otel.SpanAttributes): this {
    Object.assign(this.record.attributes, attributes);
    return this;
  }
  addEvent(name: string, attributes?: unknown): this {
    this.record.events.push({ name, attributes });
    return this;
  }
  addLink(): this {
    return this;
  }
  addLinks(): this {
    return this;
  }
  setStatus(status: otel.SpanStatus): this {
    this.record.status = status;
    return this;
  }
  updateName(name: string): this {
    this.record.name = name;
    return this;
  }
  end(): void {
    this.record.ended = true;
  }
  isRecording(): boolean {
    return !this.record.ended;
  }
  recordException(exception: otel.Exception): void {
    this.record.events.push({ exception: String(exception), stack: (exception as Error).stack });
  }
}

/** A context manager on AsyncLocalStorage: what the real SDK installs, minus the SDK. */
class AlsContextManager implements otel.ContextManager {
  readonly #storage = new AsyncLocalStorage<otel.Context>();
  active(): otel.Context {
    return this.#storage.getStore() ?? otel.ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: otel.Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(context, () => fn.call(thisArg, ...args));
  }
  bind<T>(_context: otel.Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#storage.disable();
    return this;
  }
}

/**
 * Installs a global recording tracer (also returned, for spans of the test's own); `uninstall`
 * restores the no-op API.
 */
export function installRecordingTracer(): { spans: SpanRecord[]; tracer: otel.Tracer; uninstall(): void } {
  const spans: SpanRecord[] = [];
  const tracer = {
    startSpan(name: string, options: otel.SpanOptions = {}, ctx = otel.context.active()) {
      const parent = otel.trace.getSpanContext(ctx);
      const spanContext = {
        traceId: parent?.traceId ?? randomBytes(16).toString('hex'),
        spanId: randomBytes(8).toString('hex'),
        traceFlags: otel.TraceFlags.SAMPLED,
      };
      const record: SpanRecord = {
        name,
        kind: options.kind ?? otel.SpanKind.INTERNAL,
        traceId: spanContext.traceId,
        spanId: spanContext.spanId,
        parentSpanId: parent?.spanId,
        attributes: { ...options.attributes },
        status: { code: otel.SpanStatusCode.UNSET },
        events: [],
        ended: false,
      };
      spans.push(record);
      return new RecordingSpan(record, spanContext);
    },
    startActiveSpan(name: string, ...rest: unknown[]) {
      const fn = rest.at(-1) as (span: otel.Span) => unknown;
      const span = this.startSpan(name);
      return otel.context.with(otel.trace.setSpan(otel.context.active(), span), () => fn(span));
    },
  } as otel.Tracer;
  otel.context.setGlobalContextManager(new AlsContextManager());
  otel.trace.setGlobalTracerProvider({ getTracer: () => tracer });
  return {
    spans,
    tracer,
    uninstall() {
      otel.trace.disable();
      otel.context.disable();
    },
  };
}
