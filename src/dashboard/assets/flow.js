// A job's flow on its page.
import { el } from './dom.js';

// The flow a job belongs to (lh.getFlow), drawn as a graph: one column per depth (a node sits one
// column right of its deepest parent), each node a link with its status, then the same as a table
// with each node's parents. The first FLOW_SHOWN nodes; the search's flow filter lists them all.
const FLOW_SHOWN = 200;

function depths(nodes) {
  const byRef = new Map(nodes.map((n) => [n.ref, n]));
  const depth = new Map();
  const visit = (n, seen) => {
    if (depth.has(n.ref)) return depth.get(n.ref);
    if (seen.has(n.ref)) return 0; // a cycle cannot be stored; guard anyway
    seen.add(n.ref);
    let d = 0;
    for (const ref of n.dependsOn) {
      const parent = byRef.get(ref);
      if (parent) d = Math.max(d, visit(parent, seen) + 1);
    }
    depth.set(n.ref, d);
    return d;
  };
  for (const n of nodes) visit(n, new Set());
  return depth;
}

function parentsText(refs) {
  return refs.slice(0, 5).join(', ') + (refs.length > 5 ? ` +${refs.length - 5}` : '');
}

export function flowSection(flow, here) {
  if (!flow) return [];
  const nodes = flow.nodes.slice(0, FLOW_SHOWN);
  const depth = depths(nodes);
  const columns = [];
  for (const n of nodes) {
    const d = depth.get(n.ref);
    columns[d] = columns[d] || [];
    columns[d].push(n);
  }
  const graph = el(
    'div',
    { class: 'flow-graph', id: 'flow-graph', role: 'list', 'aria-label': `Flow ${flow.flowId} by depth` },
    columns.map((col, d) =>
      el(
        'div',
        { class: 'flow-column', role: 'listitem', 'data-depth': d },
        el('span', { class: 'note' }, `step ${d + 1}`),
        col.map((n) =>
          el(
            'a',
            {
              class: `flow-node status-${n.status}${n.id === here ? ' here' : ''}`,
              href: `/jobs/${encodeURIComponent(n.id)}`,
              'data-ref': n.ref,
              'data-status': n.status,
              'aria-current': n.id === here ? 'page' : undefined,
              title: n.dependsOn.length ? `after ${parentsText(n.dependsOn)}` : 'no parents',
            },
            el('strong', {}, n.ref),
            el('span', {}, n.status),
          ),
        ),
      ),
    ),
  );
  const table = el(
    'div',
    { class: 'scroll' },
    el(
      'table',
      { id: 'flow' },
      el(
        'thead',
        {},
        el(
          'tr',
          {},
          ['job', 'id', 'status', 'depends on', 'if a parent dies'].map((h) => el('th', { scope: 'col' }, h)),
        ),
      ),
      el(
        'tbody',
        {},
        nodes.map((n) =>
          el(
            'tr',
            { 'data-ref': n.ref, 'data-status': n.status, class: n.id === here ? 'here' : '' },
            el('th', { scope: 'row' }, n.ref),
            el('td', {}, el('a', { href: `/jobs/${encodeURIComponent(n.id)}` }, n.id)),
            el('td', { 'data-field': 'status' }, n.status),
            el('td', {}, parentsText(n.dependsOn)),
            el('td', {}, n.onParentDead),
          ),
        ),
      ),
    ),
  );
  const more = flow.nodes.length > FLOW_SHOWN ? ` (the first ${FLOW_SHOWN} shown)` : '';
  return [
    el('h2', { id: 'h-flow' }, `Flow ${flow.flowId}: ${flow.nodes.length} jobs${more}`),
    el(
      'p',
      { class: 'note' },
      el('a', { href: `/search?flow=${encodeURIComponent(flow.flowId)}` }, 'every job of this flow'),
    ),
    graph,
    table,
  ];
}
