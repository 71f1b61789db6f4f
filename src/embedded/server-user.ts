import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { parse, resolve, sep } from 'node:path';
import { EmbeddedPostgresError } from '../shared/errors.js';

/** The system user an embedded server runs as when this process is root. */
export interface ServerUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  /** Every group it is in, the primary one included. */
  readonly groups: readonly number[];
}

/** The user PostgreSQL runs as when started by root (the server refuses to run as root itself). */
const SERVER_USER = 'postgres';

/** True when this process runs as root. */
export function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/**
 * Who the server runs as: null when this process is not root (the server runs as this process's
 * own user, which can read everything this process can), else the `postgres` system user, created
 * (as a system account without a home folder) when it does not exist.
 */
export function serverUser(): ServerUser | null {
  if (!isRoot()) return null;
  const found = lookUp(SERVER_USER);
  if (found) return found;
  try {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', SERVER_USER], { stdio: 'pipe' });
  } catch (err) {
    throw new EmbeddedPostgresError(
      `startEmbeddedPostgres: running as root, and PostgreSQL refuses to run as root, so it runs as the ` +
        `'${SERVER_USER}' system user; there is none and creating it failed (${firstLine(err)}). Create it ` +
        `(e.g. \`useradd --system --user-group ${SERVER_USER}\`), run as a user other than root, or set ` +
        'DATABASE_URL to a PostgreSQL server of your own.',
      { cause: err },
    );
  }
  const created = lookUp(SERVER_USER);
  if (!created)
    throw new EmbeddedPostgresError(
      `startEmbeddedPostgres: created the '${SERVER_USER}' user but cannot look it up`,
    );
  return created;
}

function lookUp(name: string): ServerUser | null {
  try {
    const id = (flag: string) => execFileSync('id', [flag, name], { stdio: 'pipe', encoding: 'utf8' }).trim();
    return {
      name,
      uid: Number(id('-u')),
      gid: Number(id('-g')),
      groups: id('-G').split(/\s+/).map(Number),
    };
  } catch {
    return null;
  }
}

/**
 * The first folder on the way from `/` down to `path` (itself included) that `user` may not enter,
 * judged from the mode bits (owner, group, others; ACLs are not read, so a folder only an ACL opens
 * counts as closed); null when every one is open to it, or when `user` is null (this process's own
 * user runs the server). A missing folder counts as closed.
 */
export function closedFolderOnPath(path: string, user: ServerUser | null): string | null {
  if (!user) return null;
  const absolute = resolve(path);
  const { root } = parse(absolute);
  let current = root;
  const folders = [root, ...absolute.slice(root.length).split(sep).filter(Boolean)];
  for (const [index, part] of folders.entries()) {
    if (index > 0) current = current === root ? `${root}${part}` : `${current}${sep}${part}`;
    try {
      if (!mayEnter(statSync(current), user)) return current;
    } catch {
      return current;
    }
  }
  return null;
}

function mayEnter(stat: { uid: number; gid: number; mode: number }, user: ServerUser): boolean {
  if (stat.uid === user.uid) return (stat.mode & 0o100) !== 0;
  if (user.groups.includes(stat.gid)) return (stat.mode & 0o010) !== 0;
  return (stat.mode & 0o001) !== 0;
}

/** The first line of an error's message, for a one-paragraph error of our own. */
export function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0]?.trim() ?? '';
}
