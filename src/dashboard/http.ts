import type { IncomingMessage, ServerResponse } from 'node:http';
import { isLeaseholdError, ValidationError } from '../shared/errors.js';

/** Largest request body accepted, in bytes: a reason, a filter, or a payload enqueued from the form. */
export const MAX_BODY = 65_536;

/**
 * Reads a JSON request body (at most `MAX_BODY` bytes); a non-object body reads as `{}`. Mounted in
 * an app whose body parser ran first (Express's `express.json()`), the stream is spent and the
 * parsed body is on `req.body`: that is used instead.
 */
export async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new ValidationError('body', 'expected application/json');
  }
  const parsed = (req as { body?: unknown }).body;
  if (req.readableEnded && typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
    return parsed as Record<string, unknown>;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new ValidationError('body', `larger than ${MAX_BODY} bytes`);
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return {};
  const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

/** Answers with a JSON body. */
export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(value));
}

/** Answers 200 with an HTML page. */
export function sendHtml(res: ServerResponse, html: string): void {
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end(html);
}

/**
 * Answers a request that threw: a Leasehold error with its message and code (they are written for
 * operators), malformed JSON as 400, anything else (a driver error) as a bare 500.
 */
export function sendError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (isLeaseholdError(err)) {
    const status =
      err.code === 'JOB_NOT_FOUND' || err.code === 'QUEUE_NOT_FOUND'
        ? 404
        : err.code === 'VALIDATION'
          ? 400
          : err.code === 'JOB_STATE'
            ? 409
            : 500;
    sendJson(res, status, { error: err.message, code: err.code });
    return;
  }
  if (err instanceof SyntaxError) {
    sendJson(res, 400, { error: 'malformed JSON' });
    return;
  }
  sendJson(res, 500, { error: 'internal error' });
}

/** Adds a `Set-Cookie` header, keeping any the app (or an earlier step) already set on `res`. */
export function appendCookie(res: ServerResponse, cookie: string): void {
  const set = res.getHeader('Set-Cookie');
  const list = set === undefined ? [] : Array.isArray(set) ? set : [String(set)];
  res.setHeader('Set-Cookie', [...list, cookie]);
}
