import { afterAll, describe, expect, it } from 'vitest';
import { type Dashboard, startDashboard } from '../../src/index.js';
import { migratedClient } from '../support/db.js';

const started: Dashboard[] = [];
afterAll(async () => {
  for (const d of started) await d.close();
});

describe('the dashboard job page shows its flow', () => {
  it("answers a job's flow beside the job (each node's ref, status and parents), and none for a plain job", async () => {
    const lh = await migratedClient();
    const d = await startDashboard(lh, { port: 0 });
    started.push(d);
    const { ids } = await lh.enqueueFlow([
      { ref: 'a', queue: 'dash', payload: {} },
      { ref: 'b', queue: 'dash', payload: {}, dependsOn: ['a'] },
    ]);
    const answer = await fetch(`${d.url}/api/jobs/${ids.b}`);
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { job: { id: string }; flow: { nodes: unknown[] } };
    expect(body.job.id).toBe(ids.b);
    expect(body.flow.nodes).toEqual([
      expect.objectContaining({ ref: 'a', id: ids.a, status: 'pending', dependsOn: [] }),
      expect.objectContaining({ ref: 'b', id: ids.b, status: 'waiting', dependsOn: ['a'] }),
    ]);
    const plain = await lh.enqueue('dash', {});
    const plainAnswer = (await (await fetch(`${d.url}/api/jobs/${plain.id}`)).json()) as { flow: unknown };
    expect(plainAnswer.flow).toBeNull();
    // The page's scripts (static assets since issue 18) draw the section from that answer; the
    // browser test (dashboard-operations.test.ts) checks the drawn graph.
    const script = await (await fetch(`${d.url}/assets/flow.js`)).text();
    expect(script).toContain('export function flowSection(flow, here)');
    expect(await (await fetch(`${d.url}/assets/job.js`)).text()).toContain('flowSection(flow, job.id)');
  });
});
