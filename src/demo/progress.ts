import cliProgress from 'cli-progress';

/** Where the demo shows its progress and the events of its scenario. */
export interface ProgressDisplay {
  /** Jobs finished so far. */
  update(finished: number): void;
  /** Something happened ("killed worker 2 (SIGKILL)"). */
  event(text: string): void;
  /** Ends the display (restores the cursor on a terminal). Safe to call twice. */
  stop(): void;
}

const LINE_INTERVAL_MS = 1000;

/**
 * A progress bar on a terminal; elsewhere (a pipe, CI logs) a plain line at most once a second.
 * Events are printed as they happen, above the bar.
 */
export function createProgressDisplay(
  total: number,
  stream: NodeJS.WriteStream = process.stderr,
): ProgressDisplay {
  return stream.isTTY ? barDisplay(total, stream) : lineDisplay(total, stream);
}

function barDisplay(total: number, stream: NodeJS.WriteStream): ProgressDisplay {
  const bars = new cliProgress.MultiBar(
    {
      stream,
      format: ' {bar} {value}/{total} jobs finished ({percentage}%)',
      hideCursor: true,
      // The demo handles signals itself and stops the bar on its way out.
      gracefulExit: false,
    },
    cliProgress.Presets.shades_classic,
  );
  const bar = bars.create(total, 0);
  let stopped = false;
  return {
    update: (finished) => bar.update(finished),
    // Once the bar is gone, its log buffer is never flushed again: write directly.
    event: (text) => (stopped ? stream.write(`${text}\n`) : bars.log(`${text}\n`)),
    stop() {
      if (stopped) return;
      stopped = true;
      bars.stop();
    },
  };
}

function lineDisplay(total: number, stream: NodeJS.WriteStream): ProgressDisplay {
  let lastLineAt = 0;
  let lastShown = -1;
  const percent = (n: number) => Math.floor((100 * n) / Math.max(1, total));
  return {
    update(finished) {
      const now = Date.now();
      if (finished === lastShown || (now - lastLineAt < LINE_INTERVAL_MS && finished < total)) return;
      lastLineAt = now;
      lastShown = finished;
      stream.write(`  ${finished}/${total} jobs finished (${percent(finished)}%)\n`);
    },
    event: (text) => stream.write(`${text}\n`),
    stop() {},
  };
}
