// Flows in the chaos run (`--flow-pct`): small graphs of plain jobs enqueued with lh.enqueueFlow, so
// that kills, pauses and restarts land on parents whose completions release children. Each node is
// acknowledged like any job (the lease rules apply to it), and flows-checker.mjs adds the flow rules.

/** A diamond (a -> b, c -> d) or a fan-out and back in (root -> 8 children -> join), plain jobs. */
export function makeFlow(rng) {
  const node = (ref, dependsOn) => ({
    ref,
    queue: 'chaos',
    payload: { mode: 'plain', workMs: 2 + Math.floor(rng() * 18) },
    dependsOn,
  });
  if (rng() < 0.5) {
    return [node('a'), node('b', ['a']), node('c', ['a']), node('d', ['b', 'c'])];
  }
  const children = Array.from({ length: 8 }, (_, i) => `c${i}`);
  return [node('root'), ...children.map((ref) => node(ref, ['root'])), node('join', children)];
}

/** Enqueues one flow; returns its job ids in node order. */
export async function enqueueFlowJobs(lh, nodes, maxAttempts) {
  const { ids } = await lh.enqueueFlow(nodes.map((n) => ({ ...n, maxAttempts })));
  return nodes.map((n) => ids[n.ref]);
}
