import { parse } from 'pg-connection-string';
import { ValidationError } from '../shared/errors.js';

/** One server of a host list. */
export interface HostAddress {
  /** Host name or IP address (an IPv6 address without brackets). */
  host: string;
  /** TCP port (default 5432). */
  port: number;
}

/**
 * Which session a host list must end on, as libpq's `target_session_attrs`: `any` takes the first
 * host that answers; `read-write` the first whose sessions may write (`transaction_read_only` off);
 * `primary` the first not in recovery. A queue writes on every claim: use `read-write` with a list.
 */
export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

/** Resolved connection settings: a single server as before, or a list to try in order. */
export interface ConnectionSettings {
  /**
   * The settings `pg` takes for one server (for a list, the first host's, re-aimed per host). A
   * URL's `options` parameter is taken out of the string into `options`: left in, pg would let it
   * replace the startup options Leasehold adds (the pinned search_path), not add to them.
   */
  base: { connectionString?: string; options?: string };
  /** The servers to try in order, or null for a single server without a session check. */
  hosts: HostAddress[] | null;
  /** The session a host must offer to be used. */
  targetSessionAttrs: TargetSessionAttrs;
}

/** The inputs that name a server: a connection string and/or an explicit host list. */
export interface ConnectionInput {
  connectionString?: unknown;
  hosts?: unknown;
  targetSessionAttrs?: unknown;
}

const TARGETS: readonly TargetSessionAttrs[] = ['any', 'read-write', 'primary'];
/** Most hosts in one list: a primary and its standbys, not a fleet. */
export const MAX_HOSTS = 16;
const URL_FORM = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s;

/**
 * Validates connection settings up front, so a bad one fails with a `ValidationError` when the
 * client is built rather than as an unhandled rejection in a worker's listener. Accepts libpq's
 * multi-host URL (`postgres://u@a:5432,b:5433/db?target_session_attrs=read-write`), which `pg`
 * cannot parse, and an explicit `hosts` list beside a connection string that gives the rest (user,
 * database, TLS). Messages never repeat the connection string: it may hold a password.
 */
export function resolveConnectionSettings(
  input: ConnectionInput,
  field = 'connectionString',
): ConnectionSettings {
  const { connectionString } = input;
  if (
    connectionString !== undefined &&
    (typeof connectionString !== 'string' || connectionString.trim() === '')
  ) {
    throw new ValidationError(field, 'must be a non-empty connection string');
  }
  const parsed = connectionString === undefined ? null : parseUrl(connectionString, field);
  let hosts = parsed?.hosts ?? null;
  if (input.hosts !== undefined) hosts = parseHostOption(input.hosts);
  let target = parsed?.targetSessionAttrs ?? 'any';
  if (input.targetSessionAttrs !== undefined)
    target = parseTarget(input.targetSessionAttrs, 'targetSessionAttrs');
  const base = parsed
    ? {
        connectionString: parsed.connectionString,
        ...(parsed.options !== undefined ? { options: parsed.options } : {}),
      }
    : {};
  // One server and no session check: exactly what pg does with the string itself.
  if (hosts !== null && hosts.length === 1 && target === 'any' && input.hosts === undefined) hosts = null;
  // A single server with a session check is a list of one: the check still applies.
  if (hosts === null && target !== 'any' && parsed?.server) hosts = [parsed.server];
  if (hosts === null && target !== 'any') {
    throw new ValidationError('targetSessionAttrs', 'needs a host list (several hosts in the URL, or hosts)');
  }
  return { base, hosts, targetSessionAttrs: target };
}

interface ParsedUrl {
  /** The string for pg: the first host only, target_session_attrs and options removed. */
  connectionString: string;
  /** The URL's `options` parameter (server settings at connect, `-c name=value ...`), if any. */
  options?: string;
  hosts: HostAddress[] | null;
  targetSessionAttrs: TargetSessionAttrs | undefined;
  /** The one server of a single-host URL (null for a list, or a string that is not a URL). */
  server: HostAddress | null;
}

function parseUrl(text: string, field: string): ParsedUrl {
  const match = URL_FORM.exec(text);
  if (!match) {
    // Not a URL (a socket path or key/value settings): pg reads it as before; nothing to check here.
    if (text.includes('://')) throw new ValidationError(field, 'expected a postgres:// or postgresql:// URL');
    return { connectionString: text, hosts: null, targetSessionAttrs: undefined, server: null };
  }
  const [, scheme = '', authority = '', rest = ''] = match;
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostPart = at >= 0 ? authority.slice(at + 1) : authority;
  const queryStart = rest.indexOf('?');
  const path = queryStart >= 0 ? rest.slice(0, queryStart) : rest;
  const params = new URLSearchParams(queryStart >= 0 ? rest.slice(queryStart + 1) : '');
  const targetParam = params.get('target_session_attrs');
  params.delete('target_session_attrs');
  const options = params.get('options') ?? undefined;
  params.delete('options');
  const targetSessionAttrs =
    targetParam === null ? undefined : parseTarget(targetParam, `${field} target_session_attrs`);
  if ((params.get('host') ?? '').includes(',') || (params.get('port') ?? '').includes(',')) {
    throw new ValidationError(
      field,
      'list several hosts in the URL authority (a:5432,b:5433), not in ?host=',
    );
  }
  const query = params.toString();
  const hosts = hostPart.includes(',')
    ? hostPart.split(',').map((entry) => parseHostEntry(entry, field))
    : null;
  if (hosts && hosts.length > MAX_HOSTS)
    throw new ValidationError(field, `lists more than ${MAX_HOSTS} hosts`);
  const first = hosts?.[0];
  const firstHost = first ? formatHost(first) : hostPart;
  const connectionString = `${scheme}${userinfo}${firstHost}${path}${query ? `?${query}` : ''}`;
  // Parsed as pg will parse it, so what passes here connects the same way.
  let host: string | null | undefined;
  let port: string | null | undefined;
  try {
    ({ host, port } = parse(connectionString));
  } catch {
    throw new ValidationError(
      field,
      'is not a valid connection URL (check the host, port and percent-encoding)',
    );
  }
  return {
    connectionString,
    ...(options !== undefined && options.trim() !== '' ? { options } : {}),
    hosts,
    targetSessionAttrs,
    server: hosts ? null : { host: host || 'localhost', port: port ? parsePort(port, field) : 5432 },
  };
}

function parseHostEntry(entry: string, field: string): HostAddress {
  const bracketed = /^\[([0-9A-Fa-f:.]+)\](?::(\d+))?$/.exec(entry);
  const plain = /^([^:[\]\s]+)(?::(\d+))?$/.exec(entry);
  const found = bracketed ?? plain;
  if (!found?.[1]) throw new ValidationError(field, 'has an empty or malformed host in its host list');
  return { host: found[1], port: parsePort(found[2] ?? '5432', field) };
}

function parsePort(text: string, field: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new ValidationError(field, 'has a port outside 1..65535');
  }
  return port;
}

function formatHost(address: HostAddress): string {
  return `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
}

function parseHostOption(value: unknown): HostAddress[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_HOSTS) {
    throw new ValidationError('hosts', `must be an array of 1 to ${MAX_HOSTS} { host, port } entries`);
  }
  return value.map((entry, i) => {
    const { host, port } = (entry ?? {}) as { host?: unknown; port?: unknown };
    if (typeof host !== 'string' || host.trim() === '' || host.length > 255 || /[\s,/]/.test(host)) {
      throw new ValidationError(`hosts[${i}].host`, 'must be a host name or IP address');
    }
    if (
      port !== undefined &&
      (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65_535)
    ) {
      throw new ValidationError(`hosts[${i}].port`, 'must be an integer port in 1..65535');
    }
    return { host, port: port ?? 5432 };
  });
}

function parseTarget(value: unknown, field: string): TargetSessionAttrs {
  if (typeof value === 'string' && (TARGETS as readonly string[]).includes(value))
    return value as TargetSessionAttrs;
  throw new ValidationError(field, `expected one of ${TARGETS.join(', ')}`);
}

/** Host and port for messages and comparisons, never with credentials. */
export function describeHost(address: HostAddress): string {
  return formatHost(address);
}
