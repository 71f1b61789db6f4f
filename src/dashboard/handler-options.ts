import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AnyTask } from '../runtime/task.js';

// The types of `dashboardHandler`'s options: types only, so `import 'leasehold'` loads nothing of the
// dashboard (on-demand.ts checks the options when it is called; the handler's code loads after).

/** Who a request is: an admin acts, a viewer sees every page and changes nothing. */
export type DashboardRole = 'admin' | 'viewer';

/** Options of `dashboardHandler`. */
export interface DashboardHandlerOptions {
  /** Where the dashboard is mounted, e.g. `/admin/jobs` (a leading `/`, no trailing one; `''` for the root). */
  basePath: string;
  /**
   * The application's own check, run on every request under `basePath` after the app's login:
   * `'admin'` acts, `'viewer'` only reads, `false` is answered 403. May be async.
   */
  authorize(req: IncomingMessage): DashboardRole | false | Promise<DashboardRole | false>;
  /** Everyone is a viewer, whatever `authorize` says. */
  readOnly?: boolean;
  /** Typed tasks: enqueue from the dashboard validates a task's payload with its schema. */
  tasks?: readonly AnyTask[];
  /** Recorded as the actor of replays, cancels, pauses: a name, or the app's name for the request's user. */
  actor?: string | ((req: IncomingMessage) => string);
  /**
   * The `Host` names the dashboard answers to (e.g. `app.example.com`); any other gets 421 and any
   * other `Origin` 403. Without it any `Host` is answered and an `Origin` must match the `Host`.
   */
  allowedHosts?: readonly string[];
  /** How often the metrics rollup pass runs, in ms (default 15 s); 0 turns it off. */
  rollupIntervalMs?: number;
}

/** A Node request handler `(req, res, next?)` serving the dashboard under its `basePath`. */
export interface DashboardRequestHandler {
  (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void): Promise<void>;
  /** Stops the handler's metrics rollup (the client is the caller's to close). */
  close(): Promise<void>;
}
