// The context of each client, kept off its public surface (it holds connection settings). A leaf
// module, so that rooms below the client (the runtime, the dashboard) can find a client's context
// without importing the client or the context's builder.
const contexts = new WeakMap<object, object>();

/** Records `context` as the one of `owner` (a client); used by the client's constructor. */
export function attachContext(owner: object, context: object): void {
  contexts.set(owner, context);
}

/**
 * The context of a client, for code that is handed a client but works on the context (the
 * dashboard, a worker built with `new Worker(lh, ...)`): `source` itself when it is already a
 * context.
 */
export function contextOf<C extends object>(source: object): C {
  return (contexts.get(source) ?? source) as C;
}
