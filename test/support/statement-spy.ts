import type pg from 'pg';

/**
 * A pool that records the label of every library statement sent through it (`leasehold_<label>_<digest>`),
 * for tests of what a pass sends: a feature's work that a plain schema must not pay for.
 */
export function statementsSentOn(target: pg.Pool) {
  const sent: string[] = [];
  const pool = new Proxy(target, {
    get(obj, key) {
      if (key === 'query') {
        return (config: unknown, ...rest: unknown[]) => {
          const name = (config as { name?: unknown } | null)?.name;
          if (typeof name === 'string')
            sent.push(name.replace(/^leasehold_/, '').replace(/_[0-9a-f]{10}$/, ''));
          return (obj.query as (...args: unknown[]) => unknown)(config, ...rest);
        };
      }
      const value = Reflect.get(obj, key, obj);
      return typeof value === 'function' ? value.bind(obj) : value;
    },
  });
  return { pool, labels: () => [...sent], clear: () => void sent.splice(0) };
}
