import type { ChildProcess } from 'node:child_process';
import { onTestFailed } from 'vitest';

/**
 * Prints what a child process said when the test that started it fails (issue 32): a test that
 * runs a process and fails on its exit code alone ("expected 1 to be 0") says nothing about why,
 * and on a loaded CI runner the failure may not come back. Call it where the process starts; a
 * process started outside a test (in a hook) is skipped: the hook's own error is shown.
 */
export function showOutputOnFailure(
  what: string,
  output: () => { stdout?: string; stderr?: string; code?: number | null },
): void {
  try {
    onTestFailed(() => {
      const { stdout = '', stderr = '', code } = output();
      const tail = (text: string) => (text.length > 20_000 ? `[...]${text.slice(-20_000)}` : text);
      console.error(
        `--- ${what}${code === undefined ? '' : ` (exit ${code})`}\n--- stdout:\n${tail(stdout)}\n--- stderr:\n${tail(stderr)}\n---`,
      );
    });
  } catch {
    // Not inside a test.
  }
}

/** What a watched child process wrote and how it ended. */
export interface ChildEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Keeps what `child` (spawned with piped stdout and stderr) writes, printed under `what` when the
 * test fails (showOutputOnFailure); `exited` resolves once its streams are closed.
 */
export function watchOutput(
  child: ChildProcess,
  what: string,
): { stdout: () => string; stderr: () => string; exited: Promise<ChildEnd> } {
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  let code: number | null | undefined;
  const exited = new Promise<ChildEnd>((resolve) => {
    child.on('close', (exitCode, signal) => {
      code = exitCode;
      resolve({ code: exitCode, signal, stdout, stderr });
    });
  });
  showOutputOnFailure(what, () => ({ stdout, stderr, code }));
  return { stdout: () => stdout, stderr: () => stderr, exited };
}
